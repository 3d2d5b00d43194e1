"""A simulated GPU for ``cuda-agent speedup`` (:mod:`agent.program`): tests, demos, ``--simulate``.

The program itself really runs (any command: a script that prints and writes files as the real
program would), and so does the build command; only the GPU is simulated.  Its kernels are a
table: each kernel's launch records (the JSON lines the capture library writes, see
:mod:`sandbox.capture`) and its GPU time per launch.  A kernel whose definition in the source
files has changed since the machine was made runs ``speedup`` times faster, like the simulated
executor's candidates (:class:`sandbox.testing.FakeExecutor`); the program's wall time is its
real run time plus the simulated kernel time.  Asked to save a launch's inputs, it writes
deterministic bytes of each pointer region's size, as the library writes the real ones.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent import capture as cap
from cudasrc.source import Document
from sandbox.capture import SAVE_CAP_BYTES, CaptureRun, KernelTime, parse_records
from sandbox.programs import LocalMachine


@dataclass(frozen=True)
class SimKernel:
    """One kernel of the simulated program: its recorded launches (JSON lines), how many times
    the program launches it, and the GPU time of one launch."""

    records: tuple[str, ...]
    launches: int
    ns_per_launch: int


class SimulatedMachine:
    """``sources``: the kernels' files or folders; a relative one lies under the run's folder
    (``root`` as the machine is made: the project the definitions are compared with)."""

    def __init__(
        self, kernels: Mapping[str, SimKernel], sources: Sequence[str], speedup: float = 2.0, root: str = "."
    ) -> None:
        self.kernels = dict(kernels)
        self.sources = tuple(sources)
        self.speedup = speedup
        self.runs: list[tuple[str, ...]] = []  # argv of every run, in order
        self.builds: list[str] = []
        self._original = self._definitions(root)

    def _definitions(self, root: str) -> dict[str, str]:
        """Each kernel's definition text as the source files under ``root`` hold it now (hashed)."""
        roots = [str(Path(root) / s) for s in self.sources]
        docs = [Document(p.read_text(errors="replace"), str(p)) for p in cap.source_files(roots)]
        out: dict[str, str] = {}
        for name, k in self.kernels.items():
            launch = parse_records(k.records[:1])[0]
            if not launch:
                continue
            try:
                doc, kernel = cap.find_kernel(docs, launch[0])
            except cap.CaptureMismatch:
                continue
            out[name] = hashlib.sha256(doc.data[kernel.span.start_byte : kernel.span.end_byte]).hexdigest()
        return out

    def run(
        self,
        argv: Sequence[str],
        cwd: str,
        *,
        kernel: str | None = None,
        max_launches: int = 0,
        save_dir: str | None = None,
        timeout: float | None = None,
        cancel: threading.Event | None = None,
        watch: bool = True,
    ) -> CaptureRun:
        self.runs.append(tuple(argv))
        start = time.perf_counter()
        done = subprocess.run(list(argv), cwd=cwd, capture_output=True, timeout=timeout, check=False)
        seconds = time.perf_counter() - start
        now = self._definitions(cwd)
        times: dict[str, KernelTime] = {}
        records: list[str] = []
        pattern = re.compile(kernel) if kernel else None
        for name, k in self.kernels.items():
            if pattern is not None and not pattern.search(name):
                continue
            changed = now.get(name) != self._original.get(name)
            ns = int(k.ns_per_launch / (self.speedup if changed else 1.0)) * k.launches
            times[name] = KernelTime(k.launches, ns, 1, {"sim": (k.launches, ns)})
            records.extend(k.records[:max_launches])
        if save_dir and records:
            records[0] = _saved(records[0], Path(save_dir))
        gpu_ns = sum(t.ns for t in times.values())
        if not watch:  # a plain run: the GPU's time is in the wall time, nothing is reported
            return CaptureRun((), {}, (), done.returncode, seconds + gpu_ns / 1e9, "", stdout=done.stdout)
        return CaptureRun(
            parse_records(records)[0],
            {n: t.launches for n, t in times.items()},
            (),
            done.returncode,
            seconds + gpu_ns / 1e9,
            save_dir or "",
            times,
            gpu_ns,
            done.stdout,
        )

    def build(
        self, command: str, cwd: str, timeout: float | None = None, cancel: threading.Event | None = None
    ) -> tuple[int, str]:
        self.builds.append(command)
        return LocalMachine().build(command, cwd, timeout, cancel)


def _saved(record: str, folder: Path) -> str:
    """``record`` with each pointer region saved in ``folder`` (deterministic bytes), as the
    capture library saves a launch's inputs: in parameter order, a region that would take the
    saved bytes past :data:`~sandbox.capture.SAVE_CAP_BYTES` is not saved."""
    rec = json.loads(record)
    folder.mkdir(parents=True, exist_ok=True)
    saved = 0
    for p in rec["params"]:
        if (ptr := p.get("pointer")) and saved + int(ptr["region_size"]) <= SAVE_CAP_BYTES:
            name = f"launch{rec['index']}_param{p['index']}.bin"
            (folder / name).write_bytes(hashlib.shake_256(name.encode()).digest(int(ptr["region_size"])))
            ptr["saved"] = name
            saved += int(ptr["region_size"])
    return json.dumps(rec)


@dataclass(frozen=True)
class SimBuffer:
    """A pointer parameter of a simulated launch: a device allocation of ``size`` bytes, which the
    launch changes when ``written``."""

    size: int
    written: bool


@dataclass(frozen=True)
class SimScalar:
    """A by-value parameter of a simulated launch: ``value`` packed with :mod:`struct` format
    ``fmt`` (``"i"``: int, ``"I"``: unsigned, ``"f"``: float, ``"d"``: double, ``"q"``: long long)."""

    fmt: str
    value: int | float


_HEAP = 0x7F0000000000  # where the simulated allocations start (each in its own GiB)


def launch_record(
    index: int,
    kernel: str,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    params: Sequence[SimBuffer | SimScalar],
    smem: int = 0,
) -> str:
    """One launch record (a JSON line) as the capture library writes it for a launch of
    ``kernel`` (its demangled signature) with ``params`` in order: parameter offsets aligned to
    their size, each buffer in an allocation of its own, written or not."""
    out: list[dict[str, object]] = []
    offset = 0
    for i, p in enumerate(params):
        if isinstance(p, SimBuffer):
            size = 8
            address = _HEAP + (i << 30)
            raw = address.to_bytes(8, "little")
            pointer = {
                "value": address,
                "base": address,
                "alloc_size": p.size,
                "region_start": address,
                "region_size": p.size,
                "offset": 0,
                "before": "00000000000000a1",
                "after": "00000000000000b2" if p.written else "00000000000000a1",
            }
        else:
            raw = struct.pack("<" + p.fmt, p.value)
            size = len(raw)
        offset = (offset + size - 1) // size * size
        param: dict[str, object] = {"index": i, "offset": offset, "size": size, "hex": raw.hex()}
        if isinstance(p, SimBuffer):
            param["pointer"] = pointer
        out.append(param)
        offset += size
    rec = {
        "event": "launch",
        "index": index,
        "api": "__cudaLaunchKernel",
        "kernel": kernel,
        "mangled": "_Z" + kernel.split("(")[0].split()[-1],
        "grid": list(grid),
        "block": list(block),
        "smem": smem,
        "params": out,
    }
    return json.dumps(rec)


def load_kernels(path: str | Path) -> dict[str, SimKernel]:
    """A simulated program's kernel table from JSON (``{"kernels": {name: {"records": [...],
    "launches": N, "ns_per_launch": T}}}``, as ``tests/data/program/multi_sim.json``)."""
    doc = json.loads(Path(path).read_text())
    return {
        name: SimKernel(tuple(k["records"]), int(k["launches"]), int(k["ns_per_launch"]))
        for name, k in doc["kernels"].items()
    }
