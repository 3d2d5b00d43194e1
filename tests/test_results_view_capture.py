"""bench/results_view_capture.py on the simulated GPU: it drives the real language server over
stdio like the editor (the Optimize lens's command, then the results view's request), writes the
payload as it came over the wire and the progress as JSON lines, and stops itself by its deadline."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parent.parent
SCRIPT = ROOT / "bench" / "results_view_capture.py"
RENDER = ROOT / "extension" / "e2e" / "render_results.mjs"

TINY = """\
__global__ void copy(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}

// @cuda-agent sizes n=1<<20 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg y out float[n]
// @cuda-agent arg n = n
__global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""


def capture(
    tmp_path: Path, *args: str, delay_s: float = 0.0
) -> tuple[subprocess.CompletedProcess[str], Path]:
    kernel = tmp_path / "scale.cu"
    kernel.write_text(TINY)
    out = tmp_path / "out"
    env = {**os.environ, "CUDA_AGENT_TEST_EXECUTOR_DELAY": str(delay_s)}
    env.pop("CUDA_AGENT_TEST_EXECUTOR", None)  # the --simulate setting alone picks the simulated GPU
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), "--simulate", *args, str(kernel)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    return done, out


def progress(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_it_records_the_results_view_of_an_optimize_run(tmp_path: Path) -> None:
    done, out = capture(tmp_path, "--budget", "4c", "--kernel", "scale")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["ok"] and summary["started"]["status"] == "started" and summary["kernels"] == ["scale"]
    run_id = summary["started"]["runId"]

    (row,) = json.loads((out / "results_view.json").read_text())["results"]
    opt = row["results"]["optimize"]  # a KernelEntry: file, kernel, and its results by kind
    assert (row["file"], row["kernel"], opt["runId"]) == ("scale.cu", "scale", run_id)
    assert opt["simulated"] is True and opt["device"] == "simulated GPU"  # camelCase: the wire's own keys
    assert 1 <= opt["attempts"] <= 4 and len(opt["history"]) == opt["attempts"]
    assert opt["roofline"]["peakGbps"] > 0

    lines = progress(out)
    assert [line["t_s"] for line in lines] == sorted(line["t_s"] for line in lines)
    lens = next(line for line in lines if "lens" in line)
    assert lens["command"] == "cudaAgent.optimize" and lens["arguments"][0]["kernel"] == "scale"
    kinds = [line["params"]["value"]["kind"] for line in lines if line.get("method") == "$/progress"]
    assert kinds[0] == "begin" and kinds[-1] == "end"
    (finished,) = [line["params"] for line in lines if line.get("method") == "cudaAgent/runFinished"]
    assert finished["runId"] == run_id and finished["simulated"] is True


@pytest.mark.slow
def test_it_cancels_the_run_and_stops_by_its_deadline(tmp_path: Path) -> None:
    started = time.monotonic()
    # 0.5 s per candidate and 200 to try: only the deadline ends the run
    done, out = capture(tmp_path, "--budget", "200c", "--deadline-s", "28", "--kernel", "scale", delay_s=0.5)
    assert time.monotonic() - started < 40
    assert done.returncode == 0, done.stderr[-2000:]
    lines = progress(out)
    assert any(line.get("cancel") for line in lines)
    (finished,) = [line["params"] for line in lines if line.get("method") == "cudaAgent/runFinished"]
    assert finished["cancelled"] is True
    (row,) = json.loads((out / "results_view.json").read_text())["results"]
    assert row["kernel"] == "scale"


@pytest.mark.slow
def test_a_kernel_without_an_optimize_lens_is_a_clear_error(tmp_path: Path) -> None:
    done, _ = capture(tmp_path, "--kernel", "copy")  # no spec: no Optimize lens
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "no Optimize lens for copy" in json.loads(done.stdout.splitlines()[-1])["error"]


def test_a_missing_kernel_file_is_a_clear_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path / "out"), str(tmp_path / "none.cu")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "none.cu: no such file" in done.stderr and "Traceback" not in done.stderr


def replay_missing() -> str:
    """Why the replay cannot run here ("" when it can): node, chromium, esbuild, playwright-core."""
    if shutil.which("node") is None or not Path("/usr/bin/chromium").exists():
        return "node or /usr/bin/chromium missing"
    probe = subprocess.run(
        ["node", "-e", "require.resolve('esbuild'); require.resolve('playwright-core')"],
        cwd=RENDER.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return "" if probe.returncode == 0 else "esbuild or playwright-core not installed (npm ci; e2e/setup.sh)"


@pytest.mark.slow
def test_the_replay_renders_a_recorded_payload_with_the_extensions_view(tmp_path: Path) -> None:
    if why := replay_missing():
        pytest.skip(why)
    done, out = capture(tmp_path, "--budget", "3c", "--kernel", "scale")
    assert done.returncode == 0, done.stderr[-2000:]
    png = tmp_path / "view.png"
    args = [str(out / "results_view.json"), str(png), "--session", str(out / "progress.jsonl")]
    shown = subprocess.run(["node", str(RENDER), *args], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["kernels"] == "scale"
    head = png.read_bytes()[:24]
    width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and width == 2 * 1100 and height > 400
    (tmp_path / "empty.json").write_text('{"results": []}')
    refused = subprocess.run(
        ["node", str(RENDER), str(tmp_path / "empty.json"), str(tmp_path / "no.png")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2 and "no results" in refused.stderr and not (tmp_path / "no.png").exists()
