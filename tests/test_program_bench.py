"""bench/program_speedup.py --simulate: the GPU script's plumbing on the simulated GPU (CPU only)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_simulate_mode_writes_a_line_with_every_field(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        str(ROOT / "bench" / "program_speedup.py"),
        "--out",
        str(tmp_path),
        "--deadline",
        "120",
    ]
    cmd += ["--simulate", "--budget", "6", "--runs", "2"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = (tmp_path / "program_speedup.jsonl").read_text().splitlines()
    rec = json.loads(line)
    assert rec["outcome"] in ("faster", "not_faster") and rec["outputs_equal"] is True
    assert [k["chosen"] for k in rec["kernels"]] == [True, True, False, False]
    assert rec["files_patched"] and (tmp_path / "multi.patch").read_text().startswith("--- a/")
    assert rec["wall_before_s"]["n"] == 2 and rec["wall_after_s"]["n"] == 2
    assert rec["predicted_speedup"] > 1.0 and rec["measured_gpu_speedup"] > 1.0
    assert any(r["applied"] and "recorded" in r["verified"] for r in rec["rewrites"])


def test_the_programs_named_by_the_script_are_vendored_with_their_origin() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import program_speedup as bench

    for p in bench.PROGRAMS:
        folder = bench.PROGRAMS_DIR / p.folder
        sources = [f for f in folder.rglob("*") if f.suffix in (".cu", ".cuh", ".cpp", ".h")]
        assert sources, p.name
        for f in sources:
            assert f.read_text().startswith("// Origin: github.com/NVIDIA/cuda-samples@"), f
        assert (folder / "Makefile").is_file()
    assert (
        "BSD" in (ROOT / "bench" / "programs" / "LICENSE.cuda-samples").read_text()
        or "Redistribution" in (ROOT / "bench" / "programs" / "LICENSE.cuda-samples").read_text()
    )
