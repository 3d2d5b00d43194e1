"""``cuda-agent capture`` on real programs, on a GPU (issue 25's must-show).

    python3 bench/capture_check.py --out DIR [--deadline-s 450] [--budget 20s]

Steps, each one JSON line in DIR/capture_check.jsonl as soon as it is done (a failing step is a
line with its error; the rest go on), all inside the deadline:
  build      the CUPTI injection library (compiler, CUPTI and CUDA header folders, seconds)
  (a) multi  tests/data/capture/multi built with nvcc (kernels in inc/, launchers in src/launch.cu,
             sizes in src/main.cpp); capture of smooth3 (pointers into one allocation) and add_rows
             (2-D launch, an atomically updated array)
  (c) template  both instantiations of scale_shift<T, UNROLL> captured, each compared with the launch
  (b) cupy   tests/data/capture/cupy/run.py: a CuPy RawKernel (saxpy) launched from Python
      torch  tests/data/capture/torch_ext/run.py: load_inline extension (skipped when torch or ninja
             is missing or time is short)
  Each capture is compared with what the program launched (its sizes are known here): grid, block,
  smem, array counts, offsets, roles, scalar values -> "equal": true/false with the differences.
  optimize   the captured spec written into a copy of the file, then `optimize --budget` on it
  overhead   the program's wall time plain, with capture of one launch, with capture of 8 launches
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent import capture as cap  # noqa: E402
from cudasrc import specs as specs  # noqa: E402
from cudasrc.source import Document  # noqa: E402
from sandbox import capture as runner  # noqa: E402

DATA = ROOT / "tests" / "data" / "capture"
N, ROWS, COLS = 100000, 48, 1000


class Bench:
    def __init__(self, out: Path, deadline_s: float) -> None:
        self.out = out
        self.end = time.monotonic() + deadline_s
        out.mkdir(parents=True, exist_ok=True)
        self.log = (out / "capture_check.jsonl").open("a")

    def left(self) -> float:
        return self.end - time.monotonic()

    def write(self, rec: dict[str, Any]) -> None:
        rec["t_left_s"] = round(self.left(), 1)
        self.log.write(json.dumps(rec, default=str) + "\n")
        self.log.flush()
        print(json.dumps(rec, default=str)[:400], flush=True)

    def step(self, name: str, need_s: float, fn: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        if self.left() < need_s:
            self.write({"step": name, "skipped": f"{self.left():.0f} s left, needs {need_s:.0f} s"})
            return None
        start = time.monotonic()
        try:
            rec = fn()
            rec = {"step": name, "ok": True, **rec}
        except Exception as exc:  # one failure must not lose the rest
            rec = {
                "step": name,
                "ok": False,
                "error": f"{type(exc).__name__}: {exc}",
                "trace": traceback.format_exc()[-1500:],
            }
        rec["seconds"] = round(time.monotonic() - start, 2)
        self.write(rec)
        return rec


def cli(args: list[str], timeout: float, extra_env: dict[str, str] | None = None) -> tuple[int, str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.update(extra_env or {})
    done = subprocess.run(
        [sys.executable, "-m", "server", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    return done.returncode, done.stdout, done.stderr


def captured(
    bench: Bench,
    source: Path,
    program: list[str],
    kernel: str,
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> dict:
    rc, out, err = cli(
        ["capture", "--json", "--source", str(source), "--kernel", kernel, *extra, "--", *program],
        timeout=max(30.0, bench.left() - 10),
        extra_env=env,
    )
    if rc != 0:
        raise RuntimeError(f"capture exit {rc}: {err.strip()[-600:]}")
    return json.loads(out)


def as_problem(result: dict) -> specs.KernelSpec:
    doc = Document(Path(result["file"]).read_text(), result["file"])
    kernel = next(k for k in doc.kernels if k.qualified_name == result["kernel"])
    edited = Document(cap.with_spec(doc, kernel, result["spec"]), result["file"])
    got = specs.spec_for(edited, next(k for k in edited.kernels if k.qualified_name == result["kernel"]))
    if got.spec is None or got.errors:
        raise RuntimeError(f"spec does not parse: {[e.message for e in got.errors]}")
    return got.spec


def compare(
    result: dict, grid: tuple, block: tuple, smem: int, arrays: dict, scalars: dict
) -> dict[str, Any]:
    """The captured spec, resolved, against what the program launched."""
    problem = specs.problems(as_problem(result))[-1]
    got_arrays = {a.name: [a.role, a.dtype, a.count, a.offset] for a in problem.args if a.role != "scalar"}
    got_scalars = {a.name: a.value for a in problem.args if a.role == "scalar"}
    want = {
        "grid": list(grid),
        "block": list(block),
        "smem": smem,
        "arrays": {k: list(v) for k, v in arrays.items()},
        "scalars": scalars,
    }
    got = {
        "grid": list(problem.launch.grid),
        "block": list(problem.launch.block),
        "smem": problem.launch.shared_bytes,
        "arrays": got_arrays,
        "scalars": got_scalars,
    }
    diffs = {k: {"want": want[k], "got": got[k]} for k in want if want[k] != got[k]}
    return {
        "kernel": result["launch"]["kernel"],
        "api": result["launch"]["api"],
        "equal": not diffs,
        "differences": diffs,
        "spec": result["spec"],
        "notes": result["notes"],
        "program_seconds": round(result["seconds"], 3),
    }


def optimize(bench: Bench, result: dict, budget: str) -> dict[str, Any]:
    """The captured spec written into a copy of the kernel's file, then optimize on it."""
    work = Path(tempfile.mkdtemp(prefix="capture-opt-"))
    src = Path(result["file"])
    shutil.copytree(src.parent, work / src.parent.name)
    copy = work / src.parent.name / src.name
    doc = Document(copy.read_text(), str(copy))
    kernel = next(k for k in doc.kernels if k.qualified_name == result["kernel"])
    copy.write_text(cap.with_spec(doc, kernel, result["spec"]))
    rc, out, err = cli(
        [
            "optimize",
            str(copy),
            "--kernel",
            result["kernel"],
            "--budget",
            budget,
            "--json",
            "--trajectory",
            "off",
        ],
        timeout=max(60.0, bench.left() - 5),
    )
    try:
        data = json.loads(out)
    except json.JSONDecodeError:
        return {"rc": rc, "stderr": err[-800:]}
    keep = ("outcome", "speedup", "speedup_low", "speedup_high", "stop_reason", "attempts")
    best = data.get("best") or {}
    record = data.get("record") or {}  # the run's OptimizeRecord (agent.records)
    return {
        "rc": rc,
        "kernel": result["kernel"],
        **{k: record.get(k) for k in keep},
        "best": best.get("description"),
    }


def timed(argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True, timeout=120)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline-s", type=float, default=450.0)
    ap.add_argument("--budget", default="20s", help="optimize budget per kernel")
    args = ap.parse_args()
    bench = Bench(Path(args.out), args.deadline_s)
    work = Path(tempfile.mkdtemp(prefix="capture-check-"))
    state: dict[str, Any] = {}

    def build() -> dict[str, Any]:
        tc = runner.toolchain()
        start = time.perf_counter()
        lib = runner.build_library(work / "lib", tc)
        state["lib"] = lib
        return {
            "toolchain": tc.__dict__,
            "build_seconds": round(time.perf_counter() - start, 2),
            "library": str(lib),
        }

    if bench.step("build", 30, build) is None or "lib" not in state:
        return 1
    os.environ["CUDA_AGENT_CAPTURE_LIBRARY"] = str(state["lib"])

    def build_multi() -> dict[str, Any]:
        shutil.copytree(DATA / "multi", work / "multi")
        cmd = ["nvcc", "-O2", "-arch=native", "-o", "prog", "src/main.cpp", "src/launch.cu", "-Iinc"]
        done = subprocess.run(cmd, cwd=work / "multi", capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-800:])
        state["multi"] = work / "multi" / "prog"
        return {"command": " ".join(cmd)}

    bench.step("a.build", 60, build_multi)
    results: dict[str, dict] = {}
    if "multi" in state:
        prog, src = [str(state["multi"])], work / "multi"

        def smooth() -> dict[str, Any]:
            results["smooth3"] = r = captured(bench, src, prog, "^smooth3")
            arrays = {"u": ("in", "float32", N + 3, 1), "out": ("out", "float32", N + 1, 0)}
            return compare(r, (-(-N // 256), 1, 1), (256, 1, 1), 0, arrays, {"n": N})

        def add_rows() -> dict[str, Any]:
            r = captured(bench, src, prog, "^add_rows")
            arrays = {"acc": ("inout", "float32", COLS, 0), "x": ("in", "float32", ROWS * COLS, 0)}
            return compare(r, (-(-COLS // 32), ROWS, 1), (32, 1, 1), 0, arrays, {"rows": ROWS, "cols": COLS})

        def template(
            t: str, dtype: str, unroll: int, block: int, alpha: float, shift: float
        ) -> dict[str, Any]:
            results[f"scale_shift<{t}>"] = r = captured(bench, src, prog, f"scale_shift<{t}")
            arrays = {"x": ("in", dtype, N, 0), "y": ("out", dtype, N, 0)}
            grid = (-(-N // (block * unroll)), 1, 1)
            return compare(r, grid, (block, 1, 1), 0, arrays, {"n": N, "alpha": alpha, "shift": shift})

        def driver_path() -> dict[str, Any]:
            """The same launch with __cudaLaunchKernel's arguments left alone: the driver callback's record."""
            r = captured(bench, src, prog, "^smooth3", env={"CUDA_AGENT_CAPTURE_INTERNAL": "0"})
            arrays = {"u": ("in", "float32", N + 3, 1), "out": ("out", "float32", N + 1, 0)}
            return compare(r, (-(-N // 256), 1, 1), (256, 1, 1), 0, arrays, {"n": N})

        def save_inputs() -> dict[str, Any]:
            import numpy as np

            saved = work / "saved"
            r = captured(bench, src, prog, "^smooth3", extra=("--save-inputs", str(saved)))
            files = r["saved_inputs"]
            u = np.fromfile(files["u"], dtype=np.float32)
            want = np.zeros(N + 3, dtype=np.float32)
            want[:N] = 1.5  # main.cpp copies n values of 1.5 into the pool before the launches
            return {
                "files": files,
                "u_equal_to_program_data": bool(np.array_equal(u, want)),
                "u_elements": int(u.size),
            }

        bench.step("a.smooth3", 20, smooth)
        bench.step("a.smooth3_driver_path", 20, driver_path)
        bench.step("a.save_inputs", 20, save_inputs)
        bench.step("a.add_rows", 20, add_rows)
        bench.step("c.scale_shift<float>", 20, lambda: template("float", "float32", 4, 128, 2.0, 0.25))
        bench.step("c.scale_shift<double>", 20, lambda: template("double", "float64", 2, 64, 0.5, -1.0))

    def cupy_prog() -> dict[str, Any]:
        shutil.copytree(DATA / "cupy", work / "cupy")
        n = 1 << 20
        r = captured(bench, work / "cupy", [sys.executable, str(work / "cupy" / "run.py"), str(n)], "^saxpy$")
        results["saxpy"] = r
        arrays = {"x": ("in", "float32", n, 0), "y": ("inout", "float32", n, 0)}
        return compare(r, (n // 256, 1, 1), (256, 1, 1), 0, arrays, {"a": 3.0, "n": n})

    bench.step("b.cupy_rawkernel", 30, cupy_prog)

    def torch_prog() -> dict[str, Any]:
        import importlib.util

        if importlib.util.find_spec("torch") is None or shutil.which("ninja") is None:
            return {"skipped": "torch or ninja missing"}
        shutil.copytree(DATA / "torch_ext", work / "torch_ext")
        n = 1 << 20
        (work / "torch_build").mkdir()
        argv = [sys.executable, str(work / "torch_ext" / "run.py"), str(n), str(work / "torch_build")]
        start = time.perf_counter()
        subprocess.run(
            argv, check=True, capture_output=True, timeout=max(30.0, bench.left() - 60)
        )  # builds it once
        build_s = time.perf_counter() - start
        r = captured(bench, work / "torch_ext", argv, "relu_scale")
        arrays = {"x": ("in", "float32", n, 0), "y": ("out", "float32", n, 0)}
        return {
            "build_seconds": round(build_s, 1),
            **compare(r, (n // 128, 1, 1), (128, 1, 1), 0, arrays, {"s": 2.0, "n": n}),
        }

    bench.step("b.torch_load_inline", 150, torch_prog)

    for name in ("smooth3", "scale_shift<double>", "saxpy"):
        if name in results:
            bench.step(f"optimize.{name}", 60, functools.partial(optimize, bench, results[name], args.budget))

    def overhead() -> dict[str, Any]:
        prog = [str(state["multi"]), str(N), "200"]  # 800 launches
        plain = min(timed(prog) for _ in range(3))
        env1 = dict(
            os.environ,
            CUDA_INJECTION64_PATH=str(state["lib"]),
            CUDA_AGENT_CAPTURE_OUT=str(work / "o1.jsonl"),
            CUDA_AGENT_CAPTURE_KERNEL="^smooth3",
            CUDA_AGENT_CAPTURE_LAUNCH="0",
        )
        one = min(timed(prog, env1) for _ in range(3))
        env8 = dict(env1, CUDA_AGENT_CAPTURE_OUT=str(work / "o8.jsonl"), CUDA_AGENT_CAPTURE_MAX="8")
        env8.pop("CUDA_AGENT_CAPTURE_KERNEL")
        env8.pop("CUDA_AGENT_CAPTURE_LAUNCH")
        eight = min(timed(prog, env8) for _ in range(3))
        return {
            "launches": 800,
            "plain_s": round(plain, 3),
            "capture_one_launch_s": round(one, 3),
            "capture_8_launches_s": round(eight, 3),
            "overhead_one": round(one / plain, 3),
            "overhead_8": round(eight / plain, 3),
        }

    if "multi" in state:
        bench.step("overhead", 30, overhead)
    bench.write({"step": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
