"""`cuda-agent compare`: a rewrite the user already has, verified and timed against the original.

CPU-only: the simulated GPU (``CUDA_AGENT_TEST_EXECUTOR=1``) stands in for the sandbox, and the
request it receives is checked for what the real sandbox would run (the candidate's own unit,
compiled here with NVRTC, and its launches); through a remote worker on loopback too."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from test_remote import TOKEN, running_worker

from agent import compare as cmp
from agent.proposal import Proposal
from agent.target import Target, TargetError, target_for
from cudasrc.source import Document
from sandbox.compiler import compile_cuda
from sandbox.contract import Check, Status
from sandbox.testing import FakeExecutor
from server.cli.main import main

DATA = Path(__file__).parent / "data" / "compare"


@pytest.fixture
def pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CUDA_AGENT_TEST_EXECUTOR", "1")
    shutil.copy(DATA / "vadd_elsewhere.cu", tmp_path / "vadd_elsewhere.cu")
    return Path(shutil.copy(DATA / "vadd_pair.cu", tmp_path / "vadd_pair.cu"))


def prepared(file: Path, with_: str, launch: str | None = None) -> tuple[Target, Proposal]:
    doc = Document.from_file(file)
    target = target_for(doc, "vadd")
    ref = cmp.CandidateRef.parse(with_, exists=(file.parent / with_).is_file() or None)
    cand_doc = doc if ref.path is None else Document.from_file(file.parent / ref.path)
    cand = cmp.find_kernel(cand_doc, ref.kernel, "--with")
    change = cmp.parse_launch(launch) if launch else None
    return target, cmp.candidate_proposal(target, doc.kernel("vadd"), doc, cand_doc, cand, change)  # type: ignore[arg-type]


def evaluated(target: Target, proposal: Proposal) -> tuple[cmp.Comparison, FakeExecutor]:
    executor = FakeExecutor()
    return cmp.compare(target, proposal, executor), executor


def test_a_kernel_of_the_same_file_runs_as_its_own_unit_under_its_launch_line(pair: Path) -> None:
    target, proposal = prepared(pair, "vadd_x4")
    found, executor = evaluated(target, proposal)
    (request,) = executor.requests
    (cand,) = request.candidates
    assert cand.kernel.name == "vadd_x4" and "void vadd_x4(" in cand.kernel.source
    assert "void vadd(" not in cand.kernel.source and "add2" in cand.kernel.source  # its helper came along
    out = compile_cuda(cand.kernel.source, name_expressions=("vadd_x4",), options=cand.kernel.options)
    assert out.result.ok, out.result.log
    # sizes come from vadd's spec, the launch from vadd_x4's own line: block 256, 4 elements per thread
    assert cand.launches is not None
    assert [lc.block for lc in cand.launches] == [(256, 1, 1)] * 3
    assert [lc.grid[0] for lc in cand.launches] == [1, 5, (1 << 24) // 1024]
    assert request.baseline == target.baseline and request.options.sanitize
    assert found.verified and found.candidate.speedup == pytest.approx(2.0)


def test_a_kernel_of_another_file_brings_its_own_helpers_and_aliases(pair: Path) -> None:
    target, proposal = prepared(pair, "vadd_elsewhere.cu")
    assert proposal.kernel == "vadd_grid_stride" and proposal.launch is None
    found, executor = evaluated(target, proposal)
    (cand,) = executor.requests[0].candidates
    assert cand.launches is None  # no launch line, no --launch: the original's launch
    assert "typedef float real;" in cand.kernel.source and "void vadd(" not in cand.kernel.source
    out = compile_cuda(cand.kernel.source, name_expressions=(cand.kernel.name,), options=cand.kernel.options)
    assert out.result.ok, out.result.log
    assert found.verified


def test_launch_option_wins_over_the_candidates_own_line(pair: Path) -> None:
    target, proposal = prepared(pair, "vadd_x4", "grid=cdiv(n, 4 * block) block=128 smem=0")
    _, executor = evaluated(target, proposal)
    (cand,) = executor.requests[0].candidates
    assert cand.launches is not None and cand.launches[-1].block == (128, 1, 1)
    assert cand.launches[-1].grid[0] == (1 << 24) // 512


@pytest.mark.parametrize(
    ("with_", "needle"),
    [
        ("vadd_swapped", "parameter 1 `n` is `int` where vadd has `const float*`"),
        ("vadd_double", "parameter 1 `a` is `const double*`"),
    ],
)
def test_a_different_parameter_list_is_refused_before_anything_runs(
    pair: Path, with_: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(pair), "-k", "vadd", "--with", with_]) == 2
    err = capsys.readouterr().err
    assert needle in err and "cannot replace vadd" in err and "Traceback" not in err


def test_the_loop_refuses_a_proposal_whose_signature_changed(pair: Path) -> None:
    doc = Document.from_file(pair)
    target = target_for(doc, "vadd")
    code = target.definition.replace("int n)", "long n)")
    cand, why = target.candidate("c0", Proposal(code, "wider n"))
    assert cand is None and "parameter 4 `n` is `long`" in why
    cand, why = target.candidate(
        "c1", Proposal(target.definition.replace("float* c", "float* out"), "rename")
    )
    assert cand is not None and why == ""  # names may change


def test_an_unsigned_scalar_may_stand_for_an_int_whose_values_are_never_negative(pair: Path) -> None:
    """vadd's ``n`` is at least 0 at every size: a rewrite taking ``unsigned int n`` reads the same
    bits alike (the int32 the harness passes); where a spec value is negative it is refused."""
    doc = Document.from_file(pair)
    target = target_for(doc, "vadd")
    unsigned = target.definition.replace("int n)", "unsigned int n)")
    cand, why = target.candidate("c0", Proposal(unsigned, "unsigned n"))
    assert cand is not None and why == ""
    negative = replace(
        target,
        verify_problems=tuple(
            replace(p, args=tuple(replace(a, value=-1) if a.name == "n" else a for a in p.args))
            for p in target.verify_problems
        ),
    )
    cand, why = negative.candidate("c1", Proposal(unsigned, "unsigned n"))
    assert cand is None and "parameter 4 `n` is `unsigned int`" in why
    cand, why = target.candidate(
        "c2", Proposal(target.definition.replace("int n)", "unsigned long n)"), "wider")
    )
    assert cand is None and "`unsigned long`" in why  # another width is another type, whatever the values


def test_cli_json_gives_the_verdict_the_speedup_and_exit_status_0(
    pair: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(pair), "-k", "vadd", "-w", "vadd_x4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    record = out["record"]  # the record the editor stores for this comparison
    assert record["verified"] is True and record["status"] == "ok" and record["role"] == "original"
    assert out["candidate"]["kernel"] == "vadd_x4" and record["speedup"] == pytest.approx(2.0)
    assert record["speedup_low"] < 2.0 < record["speedup_high"]
    assert out["launch"] == {"grid": "cdiv(n, 4 * block)", "block": "256", "shared": None}
    assert [v["label"] for v in out["verification"]] == ["n=1000", "n=4097"]
    assert out["device"]["name"] == "simulated GPU"


def test_cli_text_names_both_kernels_and_the_measured_speedup(
    pair: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "compare",
                str(pair),
                "-k",
                "vadd",
                "-w",
                f"{pair.parent / 'vadd_elsewhere.cu'}:vadd_grid_stride",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "vadd" in text and "vadd_grid_stride" in text and "verdict: verified" in text
    assert "speedup:   2.00x" in text


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["-w", "no_such_kernel"], "no kernel 'no_such_kernel'"),
        (["-w", "missing.cu:k"], "missing.cu: no such file"),
        (["-w", "vadd"], "is the kernel itself"),
        (["-w", "vadd_x4", "--launch", "threads=5"], "unknown key `threads`"),
        (["-w", "vadd_x4", "--launch", "grid=cdiv(n, block) block=nope"], "launch"),
    ],
)
def test_mistakes_are_one_line_and_exit_2(
    pair: Path, args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(pair), "-k", "vadd", *args]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_compare_through_a_remote_worker_on_loopback(
    pair: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CUDA_AGENT_TEST_EXECUTOR")
    fake = FakeExecutor()
    with running_worker(fake) as (url, _):
        monkeypatch.setenv("CUDA_AGENT_WORKER_URL", url)
        monkeypatch.setenv("CUDA_AGENT_TOKEN", TOKEN)
        for with_ in ("vadd_x4", "vadd_elsewhere.cu"):  # two runs in a row through one worker
            assert (
                main(
                    [
                        "compare",
                        str(pair),
                        "-k",
                        "vadd",
                        "-w",
                        str(pair.parent / with_) if with_.endswith(".cu") else with_,
                        "--json",
                    ]
                )
                == 0
            )
            assert json.loads(capsys.readouterr().out)["record"]["verified"] is True
    assert [r.candidates[0].kernel.name for r in fake.requests] == ["vadd_x4", "vadd_grid_stride"]
    assert len({r.id for r in fake.requests}) == 2


def test_compare_carries_the_specs_precision_allowance_and_per_output_tolerances(tmp_path: Path) -> None:
    """`precision allow=` and `tolerance arg=...` reach the sandbox from compare as from optimize."""
    trust = Path(__file__).parent / "data" / "trust"
    doc = Document.from_file(trust / "matmul_tf32.cu")
    target = target_for(doc, "matmul_tf32_ok")
    cand = cmp.find_kernel(doc, "matmul_tf32", "--with")
    proposal = cmp.candidate_proposal(target, doc.kernel("matmul_tf32_ok"), doc, doc, cand)  # type: ignore[arg-type]
    _, executor = evaluated(target, proposal)
    assert executor.requests[0].allow_precision == ("tf32",)
    text = (
        (trust / "tiny.cu")
        .read_text()
        .replace("// @cuda-agent tolerance atol=1e-5 rtol=1e-5", "// @cuda-agent tolerance arg=out norm=1e-3")
    )
    tiny = Document(text, str(tmp_path / "tiny.cu"))
    target = target_for(tiny, "scale_tiny_loose")
    proposal = cmp.candidate_proposal(
        target,
        tiny.kernel("scale_tiny_loose"),
        tiny,
        tiny,
        cmp.find_kernel(tiny, "scale_tiny_div", "--with"),  # type: ignore[arg-type]
    )
    _, executor = evaluated(target, proposal)
    (tol,) = executor.requests[0].tolerances
    assert (tol.arg, tol.norm, tol.atol) == ("out", 1e-3, None)


class MismatchExecutor(FakeExecutor):
    """Every candidate mismatches at n=4097: output c, index 17, 3x over its bound."""

    def evaluate(self, request, *, progress=None, cancel=None):  # type: ignore[no-untyped-def]
        result = super().evaluate(request, progress=progress, cancel=cancel)
        bad = Check(
            "n=4097",
            request.seeds[0],
            False,
            max_abs_err=0.75,
            first_bad_index=17,
            arg="c",
            detail="expected 1.5, got 0.75 (error 0.75, bound 0.25: calibrated, n=1)",
            error_ratio=3.0,
            bound=0.25,
        )
        cands = tuple(
            replace(
                c, status=Status.MISMATCH, message="outputs differ", checks=(bad,), timing=None, speedup=0.0
            )
            for c in result.candidates
        )
        return replace(result, candidates=cands)


def test_a_mismatch_names_the_output_the_first_bad_index_and_the_error_against_its_bound(
    pair: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("server.cli.common.open_executor", lambda gpu, **_: MismatchExecutor())
    assert main(["compare", str(pair), "-k", "vadd", "-w", "vadd_x4", "--json"]) == 1
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["record"]["verified"] is False and out["record"]["status"] == "mismatch"
    assert out["first_failure"]["first_bad_index"] == 17 and out["first_failure"]["bound"] == 0.25
    reason = out["reason"]
    assert reason.startswith("mismatch: outputs differ; output `c` at n=4097")
    assert "first bad index 17" in reason and "worst element 3x its bound" in reason
    assert "did not verify against vadd: mismatch" in captured.err
    assert main(["compare", str(pair), "-k", "vadd", "-w", "vadd_x4"]) == 1
    assert "verdict: mismatch: outputs differ; output `c` at n=4097" in capsys.readouterr().out


def test_the_candidates_precision_line_is_its_claim_and_allowed_for_the_comparison(pair: Path) -> None:
    text = pair.read_text().replace(
        "// @cuda-agent launch grid=cdiv(n, 4 * block) block=256",
        "// @cuda-agent launch grid=cdiv(n, 4 * block) block=256\n// @cuda-agent precision allow=fp16",
    )
    pair.write_text(text)
    target, proposal = prepared(pair, "vadd_x4")
    assert proposal.precision == ("fp16",) and target.allow_precision == ()
    found, executor = evaluated(target, proposal)
    assert executor.requests[0].allow_precision == ("fp16",) and found.verified
    pair.write_text(text.replace("allow=fp16", "allow=fp8"))
    with pytest.raises(TargetError, match="precision: unknown precision `fp8`"):
        prepared(pair, "vadd_x4")


def test_block_per_row_softmax_with_dynamic_shared_memory_from_its_own_launch_line() -> None:
    """tests/data/compare/softmax_pair.cu (what bench/compare_check.py times on the GPU): the
    rewrite's launch line gives one block per row and (block / 32) * 4 bytes of dynamic shared
    memory, resolved per problem; it compiles on its own with NVRTC."""
    doc = Document.from_file(DATA / "softmax_pair.cu")
    target, proposal, _ = cmp.prepare(doc, "softmax", "softmax_rows", None, Document.from_file)
    found, executor = evaluated(target, proposal)
    (cand,) = executor.requests[0].candidates
    assert cand.launches is not None
    assert [(lc.grid[0], lc.block[0], lc.shared_bytes) for lc in cand.launches] == [
        (5, 256, 32),
        (33, 256, 32),
        (16384, 256, 32),
    ]
    out = compile_cuda(cand.kernel.source, name_expressions=(cand.kernel.name,), options=cand.kernel.options)
    assert out.result.ok, out.result.log
    assert found.verified and cmp.headline(found).startswith("verified, 2.00x")


def test_every_json_field_is_documented_in_the_guide(pair: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(pair), "-k", "vadd", "-w", "vadd_x4", "--json"]) == 0
    fields = set(json.loads(capsys.readouterr().out))
    section = (Path(__file__).parent.parent / "docs" / "guide" / "compare.md").read_text()
    table = section.split("| `--json` field |", 1)[1].split("\n\n", 1)[0]
    cells = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    documented = {name for cell in cells for name in cell.split("`")[1::2]}
    assert documented == fields


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_compare_through_the_worker_command_and_its_sandbox_with_a_scripted_gpu(
    pair: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cuda-agent worker` as its own process on loopback, its local executor compiling with NVRTC
    and running the scripted GPU handler (tests/sandbox_fakes.py) in its worker process."""
    monkeypatch.delenv("CUDA_AGENT_TEST_EXECUTOR")
    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(0o600)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tests = str(Path(__file__).parent)
    env = {
        **os.environ,
        "CUDA_AGENT_WORKER_HANDLER": "sandbox_fakes:ScriptedHandler",
        "PYTHONPATH": os.pathsep.join([tests, *sys.path]),
    }
    cmd = [sys.executable, "-m", "server", "worker", "--port", str(port), "--token-file", str(token)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not listening(port):
            assert proc.poll() is None and time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.1)
        monkeypatch.setenv("CUDA_AGENT_WORKER_URL", f"http://127.0.0.1:{port}")
        monkeypatch.setenv("CUDA_AGENT_TOKEN", TOKEN)
        assert main(["compare", str(pair), "-k", "vadd", "-w", "vadd_x4", "--json", "--no-sanitize"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["record"]["verified"] is True and out["device"]["name"] == "Fake GPU"
        assert out["message"].startswith("pid ")  # answered by the scripted handler's worker process
        assert out["result"]["resources"]["registers"] > 0  # compiled with NVRTC by the worker
        assert main(["compare", str(pair), "-k", "vadd", "-w", "vadd_swapped"]) == 2  # refused here
    finally:
        proc.terminate()
        proc.wait(timeout=30)
