"""Latency and memory of the language server on a large file, measured over stdio like an editor.

Starts ``cuda-agent serve`` (the ``test`` executor: no GPU needed), opens a generated 10,000-line
``.cu`` file with 200 kernels, and times code lens, inlay hint, document symbol and hover
requests (round trip, client side):

- ``warm``: the same version of the document, asked again and again;
- ``after_edit``: each request right after an incremental edit (a keystroke inside a kernel), so
  the server reparses incrementally and rebuilds its views first — what typing costs;
- ``during_optimize``: ``after_edit`` while an optimize run is in progress.

Round trips are timed in the client with its own garbage collector paused (a Python client's
collections would otherwise show up as server latency).  Also records the server's idle resident memory (after the first full NVRTC check) and how long
that first check took.  Writes ``bench/results/lsp_bench.json``::

    python bench/lsp_bench.py [--kernels 200] [--requests 200] [--out bench/results/lsp_bench.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lsprotocol.converters import get_converter
from pytest_lsp import client_capabilities

ROOT = Path(__file__).resolve().parents[1]

_KERNEL = """\
// Stage {i}: scaled difference of two signals, with a small smoothing window.
{spec}__global__ void stage_{i}(const float* __restrict__ a, const float* __restrict__ b, float* out, int n)
{{
    __shared__ float tile[256 + 2];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int t = threadIdx.x + 1;
    float v = 0.0f;
    if (i < n) {{
        v = a[i] * {scale}f - b[i];
    }}
    tile[t] = v;
    if (threadIdx.x == 0) {{
        tile[0] = i > 0 && i - 1 < n ? a[i - 1] - b[i - 1] : 0.0f;
    }}
    if (threadIdx.x == blockDim.x - 1) {{
        tile[t + 1] = i + 1 < n ? a[i + 1] - b[i + 1] : 0.0f;
    }}
    __syncthreads();
    float acc = 0.0f;
    #pragma unroll
    for (int k = -1; k <= 1; ++k) {{
        acc += tile[t + k];
    }}
    if (i < n) {{
        out[i] = acc / 3.0f;
    }}
}}

__device__ float helper_{i}(float x)
{{
    float y = x * x;
    for (int k = 0; k < 4; ++k) {{
        y = 0.5f * (y + x / (y + 1.0f));
    }}
    return y;
}}

// Host launcher for stage {i}: one thread per element,
// blocks of 256 threads (a multiple of the warp size),
// on the default stream.
void launch_stage_{i}(const float* a, const float* b, float* out, int n)
{{
    int block = 256;
    int grid = (n + block - 1) / block;
    stage_{i}<<<grid, block>>>(a, b, out, n);
}}

"""

_SPEC = """\
// @cuda-agent sizes n=1<<22
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg a in float[n]
// @cuda-agent arg b in float[n]
// @cuda-agent arg out out float[n]
// @cuda-agent arg n = n
"""


def synthetic_file(kernels: int) -> str:
    """A realistic large file: kernels (every other one with a spec), device helpers, launchers."""
    head = "// Generated for bench/lsp_bench.py.\n#include <cuda_runtime.h>\n\n"
    body = "".join(
        _KERNEL.format(i=i, spec=_SPEC if i % 2 == 0 else "", scale=1.0 + i / 1000) for i in range(kernels)
    )
    return head + body


def _quantiles(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    p99 = s[min(len(s) - 1, round(0.99 * (len(s) - 1)))]
    return {
        "n": len(s),
        "p50_ms": round(statistics.median(s), 3),
        "p99_ms": round(p99, 3),
        "max_ms": round(s[-1], 3),
    }


class Client:
    """A minimal JSON-RPC client over the server's stdio: no per-message object model, so the
    measured round trip is the server's time plus JSON and pipes, as for an editor."""

    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self.next_id = 0
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.diagnostics = asyncio.Event()
        self.progress: list[Any] = []
        self.reader: asyncio.Task[None] | None = None

    async def start(self, *cmd: str, env: dict[str, str]) -> int:
        self.proc = await asyncio.create_subprocess_exec(
            *cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=str(ROOT)
        )
        self.reader = asyncio.ensure_future(self._read())
        return self.proc.pid

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method: str, params: Any) -> None:
        self._send({"method": method, "params": params})

    async def request(self, method: str, params: Any) -> Any:
        self.next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = future
        self._send({"id": self.next_id, "method": method, "params": params})
        return await future

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        out = self.proc.stdout
        while True:
            length = 0
            while (line := await out.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line:
                return
            msg = json.loads(await out.readexactly(length))
            if "method" in msg and "id" in msg:  # a request from the server
                result: Any = (
                    [None] * len(msg["params"]["items"])
                    if msg["method"] == "workspace/configuration"
                    else None
                )
                self._send({"id": msg["id"], "result": result})
            elif "method" in msg:
                if msg["method"] == "textDocument/publishDiagnostics":
                    self.diagnostics.set()
                elif msg["method"] == "$/progress":
                    self.progress.append(msg["params"])
            elif msg.get("id") in self.pending:
                future = self.pending.pop(msg["id"])
                if "error" in msg:
                    future.set_exception(RuntimeError(msg["error"].get("message", "")))
                else:
                    future.set_result(msg.get("result"))

    async def stop(self) -> None:
        await self.request("shutdown", None)
        self.notify("exit", None)
        assert self.proc is not None
        await asyncio.wait_for(self.proc.wait(), 10)


def _pos(line: int, col: int) -> dict[str, int]:
    return {"line": line, "character": col}


class Bench:
    def __init__(self, client: Client, uri: str, text: str) -> None:
        self.client = client
        self.uri = uri
        self.lines = text.splitlines()
        self.kernel_lines = [i for i, t in enumerate(self.lines) if t.startswith("__global__ void stage_")]
        self.version = 1
        self.flip = False

    def edit(self, k: int) -> None:
        """Type (or delete) one character in the comment above kernel ``k``: a real incremental change."""
        line = self.kernel_lines[k % len(self.kernel_lines)] - 1
        while not self.lines[line].startswith("// Stage"):
            line -= 1
        col = len("// Stage")
        self.version += 1
        end = col + 1 if self.flip else col
        change = {
            "range": {"start": _pos(line, col), "end": _pos(line, end)},
            "text": "" if self.flip else "x",
        }
        self.flip = not self.flip
        self.client.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": self.uri, "version": self.version}, "contentChanges": [change]},
        )

    def requests(self, k: int) -> dict[str, tuple[str, dict[str, Any]]]:
        line = self.kernel_lines[(k * 37) % len(self.kernel_lines)]
        col = self.lines[line].index("stage_") + 2
        doc = {"uri": self.uri}
        visible = {"start": _pos(max(line - 30, 0), 0), "end": _pos(line + 30, 0)}
        return {
            "codeLens": ("textDocument/codeLens", {"textDocument": doc}),
            "inlayHint": ("textDocument/inlayHint", {"textDocument": doc, "range": visible}),
            "documentSymbol": ("textDocument/documentSymbol", {"textDocument": doc}),
            "hover": ("textDocument/hover", {"textDocument": doc, "position": _pos(line, col)}),
        }

    async def scenario(self, n: int, edit: bool) -> dict[str, Any]:
        # The client's own garbage collections would land inside the timed round trips (every few
        # dozen large responses): off while measuring, so the numbers are the server's.
        gc.collect()
        gc.disable()
        try:
            return await self._scenario(n, edit)
        finally:
            gc.enable()

    async def _scenario(self, n: int, edit: bool) -> dict[str, Any]:
        samples: dict[str, list[float]] = {}
        for k in range(n):
            for name, (method, params) in self.requests(k).items():
                if edit:
                    self.edit(k)
                t0 = time.perf_counter()
                result = await self.client.request(method, params)
                samples.setdefault(name, []).append((time.perf_counter() - t0) * 1000)
                if name in ("codeLens", "documentSymbol", "hover") and not result:
                    raise RuntimeError(f"{name} returned nothing")
        return {m: _quantiles(s) for m, s in samples.items()}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def children_rss_mb(pid: int) -> float:
    """Resident memory of the server's child processes (the NVRTC check process, workers)."""
    total = 0.0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        except OSError:
            continue
        if fields.get("PPid", "").strip() == str(pid):
            total += int(fields.get("VmRSS", "0 kB").split()[0]) / 1024
    return round(total, 1)


async def run(kernels: int, n: int) -> dict[str, Any]:
    text = synthetic_file(kernels)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = root / "pipeline.cu"
        path.write_text(text)
        uri = path.as_uri()
        client = Client()
        env = {**os.environ, "CUDA_AGENT_TEST_EXECUTOR": "1", "CUDA_AGENT_TEST_EXECUTOR_DELAY": "2.0"}
        pid = await client.start(sys.executable, "-m", "server", "serve", env=env)
        caps = get_converter().unstructure(client_capabilities("visual-studio-code"))
        options = {"budget": {"seconds": 300, "candidates": 1000}}
        init = {
            "processId": os.getpid(),
            "rootUri": root.as_uri(),
            "capabilities": caps,
            "initializationOptions": options,
        }
        await client.request("initialize", init)
        client.notify("initialized", {})
        t0 = time.perf_counter()
        item = {"uri": uri, "languageId": "cuda-cpp", "version": 1, "text": text}
        client.notify("textDocument/didOpen", {"textDocument": item})
        await asyncio.wait_for(client.diagnostics.wait(), 600)
        first_check_s = time.perf_counter() - t0
        await asyncio.sleep(2.0)
        idle = {"server_rss_mb": rss_mb(pid), "compiler_process_rss_mb": children_rss_mb(pid)}
        bench = Bench(client, uri, text)
        results: dict[str, Any] = {"warm": await bench.scenario(n, edit=False)}
        results["after_edit"] = await bench.scenario(n, edit=True)
        if bench.flip:  # back to the text the optimize run will see
            bench.edit(0)
        run = asyncio.ensure_future(
            client.request(
                "workspace/executeCommand",
                {"command": "cudaAgent.optimize", "arguments": [{"uri": uri, "kernel": "stage_0"}]},
            )
        )
        while not client.progress and not run.done():
            await asyncio.sleep(0.05)
        if run.done():
            raise RuntimeError(f"the optimize run ended before the measurement: {run.result()}")
        results["during_optimize"] = await bench.scenario(n, edit=True)
        optimize_running = not run.done()
        busy = {"server_rss_mb": rss_mb(pid), "children_rss_mb": children_rss_mb(pid)}
        await client.stop()
        run.cancel()
    return {
        "file": {"lines": text.count("\n"), "kernels": kernels, "bytes": len(text.encode())},
        "requests_per_method": n,
        "latency_ms": results,
        "optimize_ran_throughout": optimize_running,
        "idle_memory": idle,
        "memory_during_optimize": busy,
        "first_full_check_s": round(first_check_s, 2),
    }


def machine() -> dict[str, Any]:
    cpu = ""
    with contextlib.suppress(OSError, StopIteration):
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    return {"host": platform.node(), "cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=200)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "lsp_bench.json"))
    args = parser.parse_args()
    result = asyncio.run(run(args.kernels, args.requests))
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    report = {
        "machine": machine(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "python bench/lsp_bench.py " + " ".join(sys.argv[1:]),
        "commit": commit,
        "target_p99_ms": 20,
        "target_idle_rss_mb": 150,
        **result,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
