"""The variant corpus (tests/data/variants/<family>/*.cu, the family's passes in its passes.txt):
each spelling of a family's computation is matched by one of its passes, the rewrite compiles
with NVRTC, and it computes the original's outputs in host emulation at the spec's odd verify
sizes.  Driven by the folder: a new variant or family needs no edit here."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_transforms import DATA as HOST_HEADERS
from test_transforms import assert_all_verified, host_program

from engine import Subject
from sandbox.compiler import compile_cuda
from sandbox.contract import Candidate, EvalOptions, EvalRequest

GXX = ("g++", "-std=c++20", "-pthread", "-O0", "-fno-strict-aliasing", "-ffp-contract=off", "-w")
ENGINE = Path(__file__).parent.parent / "bench" / "variant_match.py"


def _engine():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("variant_match", ENGINE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["variant_match"] = module
    spec.loader.exec_module(module)
    return module


match = _engine()
VARIANTS = match.variants()


def test_every_family_has_four_spellings_and_names_its_passes() -> None:
    families: dict[str, int] = {}
    for family, _ in VARIANTS:
        families[family] = families.get(family, 0) + 1
    assert families, "no variants found"
    for family, count in families.items():
        assert count >= 4, f"{family} has {count} spellings"
        assert match.family_passes(family), f"{family}/passes.txt names no pass"


@pytest.mark.slow  # an NVRTC compile and a g++ build per variant
@pytest.mark.parametrize("family, path", VARIANTS, ids=[f"{f}/{p.stem}" for f, p in VARIANTS])
def test_variant_is_matched_compiles_and_is_equal_in_host_emulation(
    family: str, path: Path, tmp_path: Path
) -> None:
    out, why, t = match.rewrite(family, path)
    assert isinstance(out, Subject), f"{path.name} is not matched by {match.family_passes(family)}: {why}"
    compiled = compile_cuda(t.unit_with(out.code), name_expressions=(t.kernel,), options=t.baseline.options)
    assert compiled.result.ok, compiled.result.log
    if shutil.which("g++") is None:
        pytest.skip("no g++ for the host emulation")
    program = host_program(t, out)
    src = tmp_path / "emulate.cpp"
    src.write_text(program)
    threads = ["-DHOST_CUDA_THREADS"] if re.search(r"__syncthreads|__shfl|sync\(", program) else []
    exe = tmp_path / "emulate"
    build = subprocess.run(
        [*GXX, f"-I{HOST_HEADERS}", *threads, str(src), "-o", str(exe)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert build.returncode == 0, build.stderr[:3000]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    # sums may differ in the last bits where the rewrite changes the order of additions
    allowed = max(1e-6, (t.tolerance.atol or 0.0) if t.tolerance else 0.0)
    assert float(run.stdout) <= allowed, f"outputs differ by {run.stdout.strip()}"


@pytest.mark.gpu
def test_every_variant_rewrite_is_equivalent_on_the_gpu() -> None:
    """Each variant's rewrite verified by the sandbox against the original at the spec's verify
    sizes (with the rewrite's launch), on the GPU."""
    from sandbox.local import LocalExecutor

    with LocalExecutor() as executor:
        for family, path in VARIANTS:
            out, why, t = match.rewrite(family, path)
            assert isinstance(out, Subject), why
            launches = None
            if (out.launch.grid or out.launch.block) and t.relaunch is not None:
                *verify, _ = t.relaunch(out.launch)  # the last verify size stands in for the bench
                launches = (*verify, verify[-1])
            source = dataclasses.replace(t.baseline, source=t.unit_with(out.code))
            request = EvalRequest(
                id=f"variant-{family}-{path.stem}",
                baseline=t.baseline,
                candidates=(Candidate("rewrite", source, launches),),
                verify_problems=t.verify_problems,
                bench_problem=t.verify_problems[-1],  # verify only
                seeds=(11, 12),
                tolerance=t.tolerance,
                options=EvalOptions(time=False),
            )
            assert_all_verified(executor.evaluate(request), f"{family}/{path.name}")
