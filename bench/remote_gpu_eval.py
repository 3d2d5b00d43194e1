"""One real GPU evaluation through the remote worker, end to end on one machine.

Starts ``cuda-agent worker`` (LocalExecutor on one GPU) on loopback with a fresh token, sends a
vector-add request built directly from contract types through :class:`RemoteExecutor` — the
baseline launched with 32-thread blocks, candidates relaunched with 256 and 512, and one that
computes the wrong thing (must come back ``mismatch``) — and writes what came back, with device,
date, command and commit, as JSON::

    python bench/remote_gpu_eval.py bench/results/remote_gpu_eval.json [--gpu 0]

Exit status 0 when the evaluation came back and every verdict is the expected one, 1 otherwise;
the JSON is written either way (with ``error`` set on failure), the worker's log beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import logging
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from sandbox.contract import (
    ArgSpec,
    Candidate,
    EvalRequest,
    KernelSource,
    Launch,
    Problem,
    Progress,
    Status,
    to_dict,
)
from sandbox.executor import ExecutorError
from sandbox.remote import RemoteExecutor

ROOT = Path(__file__).resolve().parents[1]
log = logging.getLogger("remote_gpu_eval")

VADD = """
extern "C" __global__ void vadd(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}
"""
EXPECTED = {"block256": Status.OK, "block512": Status.OK, "wrong_sub": Status.MISMATCH}


def problem(n: int, block: int) -> Problem:
    args = (
        ArgSpec("a", "in", "float32", n),
        ArgSpec("b", "in", "float32", n),
        ArgSpec("c", "out", "float32", n),
        ArgSpec("n", "scalar", "int32", value=n),
    )
    return Problem(f"n={n}", {"n": n}, args, launch(n, block), bytes_moved=12 * n, flops=n)


def launch(n: int, block: int) -> Launch:
    return Launch(((n + block - 1) // block, 1, 1), (block, 1, 1))


def build_request(bench_n: int) -> EvalRequest:
    sizes = (4097, 1 << 20)  # a size that is not a multiple of any block, and a round one
    baseline = KernelSource(VADD, "vadd")

    def relaunched(block: int) -> tuple[Launch, ...]:
        return tuple(launch(n, block) for n in (*sizes, bench_n))

    return EvalRequest(
        id=f"remote-gpu-eval-{secrets.token_hex(4)}",
        baseline=baseline,
        candidates=(
            Candidate("block256", baseline, relaunched(256)),
            Candidate("block512", baseline, relaunched(512)),
            Candidate("wrong_sub", KernelSource(VADD.replace("a[i] + b[i]", "a[i] - b[i]"), "vadd")),
        ),
        verify_problems=tuple(problem(n, 32) for n in sizes),
        bench_problem=problem(bench_n, 32),
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def worker(gpu: int, token_file: Path, log_file: Path, port: int) -> Iterator[str]:
    """``cuda-agent worker`` on loopback; yields its URL once /health answers."""
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "server", "worker", "--port", str(port), "--token-file", str(token_file)]
    with log_file.open("w") as out:
        proc = subprocess.Popen(
            [*command, "--gpus", str(gpu)], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT
        )
        try:
            deadline = time.monotonic() + 180
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"the worker exited with status {proc.returncode}; see {log_file}")
                with contextlib.suppress(httpx.TransportError):
                    if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the worker did not answer /health within 180 s; see {log_file}")
                time.sleep(0.2)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        )
    except OSError:
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def run(gpu: int, bench_n: int, report: dict[str, Any]) -> bool:
    request = build_request(bench_n)
    token = secrets.token_urlsafe(32)
    with tempfile.TemporaryDirectory() as tmp:
        token_file = Path(tmp) / "token"
        token_file.write_text(token)
        token_file.chmod(0o600)
        log_file = Path(report["worker_log"])
        with worker(gpu, token_file, log_file, free_port()) as url, RemoteExecutor(url, token) as remote:
            report["worker_url"] = url
            started = time.monotonic()
            report["device"] = to_dict(remote.device_info())
            report["device_info_s"] = round(time.monotonic() - started, 3)
            progress: list[dict[str, Any]] = []

            def on_progress(p: Progress) -> None:
                progress.append({"t_s": round(time.monotonic() - started, 3), **to_dict(p)})
                log.info("progress %d/%d %s", p.done, p.total, p.message)

            started = time.monotonic()
            result = remote.evaluate(request, progress=on_progress)
            report["evaluate_s"] = round(time.monotonic() - started, 3)
            report["progress"] = progress
    report["request"] = to_dict(request)
    report["result"] = to_dict(result)
    report["summary"] = {
        c.candidate_id: {
            "status": c.status.value,
            "expected": EXPECTED[c.candidate_id].value,
            "speedup": round(c.speedup, 3),
            "speedup_range": [round(c.speedup_low, 3), round(c.speedup_high, 3)],
            "median_ms": c.timing.median_ms if c.timing else None,
            "gbps": round(c.achieved_gbps, 1),
            "message": c.message[:300],
        }
        for c in result.candidates
    }
    report["summary"]["baseline"] = {
        "status": result.baseline.status.value,
        "median_ms": result.baseline.timing.median_ms if result.baseline.timing else None,
        "gbps": round(result.baseline.achieved_gbps, 1),
    }
    ok = result.baseline.status is Status.OK and all(
        c.status is EXPECTED[c.candidate_id] for c in result.candidates
    )
    if not ok:
        report["error"] = "a verdict differs from the expected one (see summary)"
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="where to write the result JSON")
    parser.add_argument("--gpu", type=int, default=0, help="GPU index the worker serves")
    parser.add_argument("--n", type=int, default=1 << 24, help="elements in the timed problem")
    parser.add_argument("--commit", help="commit of the tree measured, where it is not a git checkout")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "benchmark": "remote_gpu_eval",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "commit": args.commit or commit(),
        "worker_log": str(args.out.with_suffix(".worker.log")),
    }
    try:
        ok = run(args.gpu, args.n, report)
    except (ExecutorError, RuntimeError, OSError) as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"
        ok = False
    args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    log.info("wrote %s (%s)", args.out, "ok" if ok else report.get("error"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
