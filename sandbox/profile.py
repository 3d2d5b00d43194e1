"""Nsight Compute profiles of a candidate (``EvalOptions.profile``), for the LLM's ``profile`` tool.

The worker's parent runs :func:`profile_candidate` for a candidate that verified: ``ncu
--clock-control none --metrics ... --csv`` on a small standalone runner of the kernel (this
module's ``main``: load the cubin, draw the bench problem's inputs for the first seed, launch the
kernel once, exit), inside the worker's sandbox prefix (bwrap) when there is one.  The result is a
:class:`~sandbox.contract.Profile`: memory and compute throughput as % of peak (speed of light),
achieved and theoretical occupancy and the resource that limits it, DRAM and L2 bytes, L2 hit
rate, duration and the top warp stall reasons, or ``available=False`` with the
reason (no ``ncu`` on the GPU machine, no access to the performance counters, the run failed).

The runner reuses the verifier's input drawing and buffers, so the profiled launch sees the same
kind of data the timed one did; it launches nothing else, so ncu's first kernel is the candidate.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.contract import Launch, Problem, Profile, Stall

NCU_CANDIDATES = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"
METRICS = {  # ncu metric -> Profile field
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "compute_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "lts__t_sector_hit_rate.pct": "l2_hit_pct",
    "gpu__time_duration.sum": "duration_us",
    "sm__maximum_warps_per_active_cycle_pct": "theoretical_occupancy_pct",
    "dram__bytes.sum": "dram_bytes",
    "lts__t_bytes.sum": "l2_bytes",
}
# ncu's Occupancy section: the blocks per SM each resource allows; the smallest is the limiter
OCCUPANCY_LIMITS = {
    "launch__occupancy_limit_registers": "registers",
    "launch__occupancy_limit_shared_mem": "shared memory",
    "launch__occupancy_limit_warps": "warps (block size)",
    "launch__occupancy_limit_blocks": "blocks per SM",
}
TOP_STALLS = 4
_TIME_SCALE = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}


def find_ncu() -> str | None:
    """The ``ncu`` executable: on ``PATH``, under ``CUDA_HOME``/``CUDA_PATH``, or a usual place."""
    if exe := shutil.which("ncu"):
        return exe
    homes = [os.environ.get(k, "") for k in ("CUDA_HOME", "CUDA_PATH")]
    for path in [*(str(Path(h) / "bin" / "ncu") for h in homes if h), *NCU_CANDIDATES]:
        if os.access(path, os.X_OK):
            return path
    return None


@dataclass(frozen=True)
class RunnerJob:
    """What the standalone runner launches: one kernel, once, on one problem (``symbols``: its
    ``__constant__`` data's lowered names, :class:`sandbox.wire.Binary`)."""

    cubin: bytes
    symbol: str
    problem: Problem
    launch: Launch
    seed: int
    device: int
    backend: str
    symbols: dict[str, str] = field(default_factory=dict)


def ncu_command(exe: str, job_file: str, log_file: str, symbol: str) -> list[str]:
    metrics = ",".join(
        [*METRICS, *OCCUPANCY_LIMITS, f"regex:{STALL_PREFIX}.*{STALL_SUFFIX.replace('.', '[.]')}"]
    )
    return [
        exe,
        "--clock-control",
        "none",
        "--metrics",
        metrics,
        "--csv",
        "--print-units",
        "base",
        "--kernel-name-base",
        "mangled",
        "--kernel-name",
        symbol,
        "--launch-count",
        "1",
        "--log-file",
        log_file,
        sys.executable,
        "-m",
        "sandbox.profile",
        job_file,
    ]


def profile_candidate(
    job: RunnerJob, prefix: Sequence[str], env: dict[str, str], cwd: str, timeout_s: float
) -> Profile:
    """Run the kernel of ``job`` once under ncu (inside ``prefix``, e.g. the worker's bwrap) and
    read its metrics; never raises for a failed run: the :class:`Profile` says why."""
    exe = find_ncu()
    if exe is None:
        return Profile(False, "Nsight Compute (ncu) is not installed on the GPU machine")
    with tempfile.TemporaryDirectory(prefix="cuda-agent-ncu-") as tmp:
        job_file, log_file = str(Path(tmp) / "job.pickle"), str(Path(tmp) / "ncu.csv")
        Path(job_file).write_bytes(pickle.dumps(job))
        wrap = [*prefix, "--bind", tmp, tmp] if prefix else []  # bwrap's /tmp is private
        cmd = [*wrap, *ncu_command(exe, job_file, log_file, job.symbol)]
        try:
            proc = subprocess.run(
                cmd, env=env, cwd=cwd, capture_output=True, timeout=timeout_s, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired:
            return Profile(False, f"ncu did not finish within {timeout_s:.0f} s")
        except OSError as exc:
            return Profile(False, f"ncu could not start: {exc.strerror or exc}")
        text = Path(log_file).read_text(errors="replace") if Path(log_file).exists() else ""
    out = parse_ncu_csv(text)
    if out.available and proc.returncode == 0:
        return out
    said = [ln for ln in (text + "\n" + proc.stderr.decode(errors="replace")).splitlines() if "ERR" in ln]
    why = said[0].strip() if said else out.message or f"exit status {proc.returncode}"
    return Profile(False, f"ncu failed: {why[:300]}")


def parse_ncu_csv(text: str) -> Profile:
    """A :class:`Profile` from ``ncu --csv --print-units base`` output (the details page: one row
    per metric), or ``available=False`` when it holds no metric row."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return Profile(False, "ncu reported no metrics (was the kernel launched?)")
    values: dict[str, float] = {}
    limits: dict[str, float] = {}
    stalls: list[Stall] = []
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        name, unit = row.get("Metric Name") or "", row.get("Metric Unit") or ""
        try:
            value = float((row.get("Metric Value") or "").replace(",", ""))
        except ValueError:
            continue
        if name in METRICS:
            values[METRICS[name]] = (
                value * _TIME_SCALE.get(unit, 1.0) if name.startswith("gpu__time") else value
            )
        elif name in OCCUPANCY_LIMITS:
            limits[OCCUPANCY_LIMITS[name]] = value
        elif name.startswith(STALL_PREFIX) and name.endswith(STALL_SUFFIX):
            stalls.append(Stall(name[len(STALL_PREFIX) : -len(STALL_SUFFIX)], value))
    if not values:
        return Profile(False, "ncu reported none of the requested metrics")
    top = sorted(
        (s for s in stalls if s.per_issue > 0 and s.reason != "selected"), key=lambda s: -s.per_issue
    )
    limiter = min(limits, key=lambda k: limits[k]) if limits else ""
    return Profile(
        True,
        stalls=tuple(top[:TOP_STALLS]),
        occupancy_limiter=limiter,
        **values,  # type: ignore[arg-type]
    )


def profile_text(p: Profile) -> str:
    """One line for people and models."""
    if not p.available:
        return f"Nsight Compute metrics not available: {p.message}"
    stalls = ", ".join(f"{s.reason} {s.per_issue:.2f}" for s in p.stalls) or "none"
    return (
        f"Nsight Compute: {p.duration_us:.4g} us; memory throughput {p.memory_pct:.0f}% of peak "
        f"(DRAM {p.dram_pct:.0f}%), compute (SM) throughput {p.compute_pct:.0f}% of peak, achieved "
        f"occupancy {p.achieved_occupancy_pct:.0f}%, L2 hit rate {p.l2_hit_pct:.0f}%; top stall reasons "
        f"(warps stalled per issued instruction): {stalls}"
    )


def _bytes(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def report_lines(p: Profile) -> list[str]:
    """The profile for a person, a few lines (``cuda-agent profile``, the editor's hover): speed of
    light, occupancy and what limits it, the top stall reasons, the bytes moved."""
    if not p.available:
        return [f"Nsight Compute metrics not available: {p.message}"]
    occupancy = f"occupancy {p.achieved_occupancy_pct:.0f}% achieved"
    if p.theoretical_occupancy_pct:
        occupancy += f" of {p.theoretical_occupancy_pct:.0f}% theoretical"
    if p.occupancy_limiter:
        occupancy += f", limited by {p.occupancy_limiter}"
    stalls = ", ".join(f"{s.reason} {s.per_issue:.2f}" for s in p.stalls) or "none"
    return [
        f"SOL memory {p.memory_pct:.0f}% (DRAM {p.dram_pct:.0f}%), compute {p.compute_pct:.0f}% "
        f"· {p.duration_us:.4g} us",
        occupancy,
        f"stalls (warps per issued instruction): {stalls}",
        f"DRAM {_bytes(p.dram_bytes)} · L2 {_bytes(p.l2_bytes)} (hit rate {p.l2_hit_pct:.0f}%)",
    ]


def run(job: RunnerJob) -> None:
    """Launch the job's kernel once on freshly drawn inputs and wait for it."""
    from sandbox.draws import constants_for, inputs_for
    from sandbox.runtime import make_runtime
    from sandbox.verify import Workspace

    rt = make_runtime(job.backend, job.device)
    kernel = rt.load(job.cubin, job.symbol, job.symbols)
    ws = Workspace(rt, job.problem)
    try:
        inputs = inputs_for(job.problem, job.seed)
        ws.prepare(inputs, 0)
        for name, host in constants_for(job.problem, job.seed, inputs).items():
            rt.htod(rt.global_symbol(kernel, name), host)
        rt.launch(kernel, job.launch, ws.args())
        rt.synchronize()
    finally:
        ws.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox.profile")
    parser.add_argument("job", help="pickled RunnerJob")
    args = parser.parse_args(argv)
    job = pickle.loads(Path(args.job).read_bytes())
    run(job)
    return 0


if __name__ == "__main__":
    # Unpickle against the imported module, so ``RunnerJob`` resolves as ``sandbox.profile.RunnerJob``.
    from sandbox.profile import main as profile_main

    sys.exit(profile_main())
