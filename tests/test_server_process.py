"""The language server as a process: it and its diagnostics checker are gone within 2 s of ``exit``,
of stdin closing or of SIGTERM, even in the middle of checking a large file; frames with a huge or
malformed Content-Length are dropped without allocating them and the server stays in step."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_server_lsp import RawConnection, raw_server

KERNEL = """// @cuda-agent sizes n=1<<20
// @cuda-agent arg x in float[n]
// @cuda-agent arg y out float[n]
__global__ void k{i}(const float* x, float* y, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    for (int j = 0; j < 64; ++j) acc += x[(i + j) % n] * {i}.0f;
    if (i < n) y[i] = acc;
}}
"""


def children(pid: int) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                stat = (proc / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(proc.name))
    return found


def alive(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) != "Z"
    except OSError:
        return False


@pytest.fixture
async def server() -> AsyncIterator[tuple[asyncio.subprocess.Process, RawConnection]]:
    async with raw_server() as started:
        yield started


async def busy_checker(proc: asyncio.subprocess.Process, conn: RawConnection, tmp_path: Path) -> int:
    """Open a file of 400 kernels and return the pid of the checker process working on it."""
    path = tmp_path / "big.cu"
    path.write_text("\n".join(KERNEL.format(i=i) for i in range(400)))
    item = {"uri": path.as_uri(), "languageId": "cuda", "version": 1, "text": path.read_text()}
    conn.send(
        json.dumps(
            {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": item}}
        ).encode()
    )
    # the checker is the child (multiprocessing also starts a resource tracker) that is started,
    # imported, and well into the file: a second of its own CPU time (not of the wall clock,
    # which a loaded machine stretches)
    deadline = time.monotonic() + 60
    while not (busy := [k for k in children(proc.pid) if cpu_seconds(k) >= 1.0]):
        assert time.monotonic() < deadline, f"no busy checker among {children(proc.pid)}"
        await asyncio.sleep(0.05)
    return busy[0]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def gone_within(proc: asyncio.subprocess.Process, checker: int, seconds: float) -> float:
    started = time.monotonic()
    await asyncio.wait_for(proc.wait(), seconds)
    while alive(checker):
        assert time.monotonic() - started < seconds, "the checker process outlived the server"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


@pytest.mark.slow
@pytest.mark.parametrize("how", ["exit", "stdin closed", "SIGTERM"])
async def test_the_server_and_its_checker_exit_within_2s_during_a_long_check(
    server: tuple[asyncio.subprocess.Process, RawConnection], tmp_path: Path, how: str
) -> None:
    proc, conn = server
    checker = await busy_checker(proc, conn, tmp_path)
    if how == "exit":
        assert (await asyncio.wait_for(conn.request("shutdown", None), 5))["result"] is None
        started = time.monotonic()
        conn.send(b'{"jsonrpc": "2.0", "method": "exit"}')  # stdin stays open, as an editor keeps it
        assert await gone_within(proc, checker, 2) < 2 and proc.returncode == 0
        assert time.monotonic() - started < 2
    elif how == "stdin closed":
        assert proc.stdin is not None
        proc.stdin.close()
        await gone_within(proc, checker, 2)
    else:
        os.kill(proc.pid, signal.SIGTERM)
        await gone_within(proc, checker, 2)


async def test_huge_and_malformed_content_lengths_are_dropped_and_the_server_keeps_step(
    server: tuple[asyncio.subprocess.Process, RawConnection],
) -> None:
    proc, conn = server
    assert proc.stdin is not None
    for header in (
        b"Content-Length: 99999999999",
        b"Content-Length: abc",
        b"Content-Length: -5",
        b"X-Nothing: 1",
    ):
        proc.stdin.write(header + b'\r\n\r\n{"jsonrpc": "2.0", "id": 999, "method": "shutdown"}')
        reply = await asyncio.wait_for(conn.request("cudaAgent/noSuchMethod", {}), 10)
        assert reply["error"]["code"] == -32601, header  # the next frame is read as sent
    rss_kib = int(
        next(
            x for x in Path(f"/proc/{proc.pid}/status").read_text().splitlines() if x.startswith("VmRSS")
        ).split()[1]
    )
    assert rss_kib < 1 << 20  # nothing near the declared 93 GiB was allocated
    assert (await asyncio.wait_for(conn.request("shutdown", None), 5))["result"] is None
    conn.send(b'{"jsonrpc": "2.0", "method": "exit"}')
    assert await asyncio.wait_for(proc.wait(), 5) == 0
