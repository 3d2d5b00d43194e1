"""bench/kernels/variants/ is the variant corpus at H200 sizes, written by bench/make_variants.py:
the committed copies are current, a stale or extra copy is found, and each copy differs from its
corpus file only in its benchmark sizes (and the dot products' added flops)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from cudasrc import specs as spec_mod
from cudasrc.source import Document

ROOT = Path(__file__).parent.parent
SCRIPT = ROOT / "bench" / "make_variants.py"
CORPUS = ROOT / "tests" / "data" / "variants"
COPIES = ROOT / "bench" / "kernels" / "variants"


def make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def only_spec(path: Path) -> spec_mod.KernelSpec:
    doc = Document(path.read_text(), str(path))
    (found,) = [s for s in (spec_mod.parse(k, doc.type_aliases)[0] for k in doc.kernels) if s is not None]
    return found


def test_the_committed_copies_are_current() -> None:
    out = make("--check")
    assert out.returncode == 0, out.stderr


def test_a_stale_or_extra_copy_is_found_and_rewritten(tmp_path: Path) -> None:
    assert make("--out", str(tmp_path)).returncode == 0
    written = sorted(tmp_path.glob("*/*.cu"))
    assert [p.relative_to(tmp_path) for p in written] == [
        p.relative_to(CORPUS) for p in sorted(CORPUS.glob("*/*.cu"))
    ]
    written[0].write_text(written[0].read_text().replace("sizes", "sizes ", 1))
    (tmp_path / "rows" / "extra.cu").write_text("// not from the corpus\n")
    out = make("--check", "--out", str(tmp_path))
    assert out.returncode == 1
    assert str(written[0]) in out.stderr and "extra.cu" in out.stderr
    assert make("--out", str(tmp_path)).returncode == 0
    assert make("--check", "--out", str(tmp_path)).returncode == 0


def test_each_copy_is_its_corpus_file_at_larger_sizes() -> None:
    for copy in sorted(COPIES.glob("*/*.cu")):
        original = CORPUS / copy.relative_to(COPIES)
        old, new = only_spec(original), only_spec(copy)
        # the same spec but for the benchmark sizes and the flops
        assert spec_mod.render(replace(new, sizes=old.sizes, flops=old.flops)) == spec_mod.render(old), copy
        bench = spec_mod.bench_sizes(new)
        assert all(bench[k] >= v for k, v in spec_mod.bench_sizes(old).items()), copy  # never smaller
        assert (new.flops != "") == (copy.parent.name == "dot"), copy  # the FP32 rate for dot products
        # the kernel's text is the corpus's, byte for byte
        assert copy.read_text().split("__global__", 1)[1] == original.read_text().split("__global__", 1)[1]
