"""`cuda-agent compare` and the LLM candidate path on a real GPU (issue 17's must-show).

    PYTHONPATH=. python3 bench/compare_check.py --out DIR      # on a GPU machine, ~2-3 minutes

Appends one JSON line per case to ``DIR/compare_check.jsonl`` as it goes, and stops itself at
``--deadline`` seconds (default 200; the cases not reached are recorded as skipped):

(a) ``adversarial``: every kernel of ``tests/data/adversarial/`` compared with its honest original
    (``tests/data/compare/vadd_spec.cu``, ``block_sum_spec.cu``: the sandbox's ``vadd.cu`` and
    ``block_sum.cu`` under a spec) through the CLI's own functions (``agent.compare.prepare`` /
    ``compare``, ``server.cli.reports.compare_report``), with the status next to the ones
    ``tests/test_sandbox_gpu.py`` asserts;
(b) ``softmax``: ``tests/data/compare/softmax_pair.cu``: the naive thread-per-row softmax against
    the hand-written block-per-row ``softmax_rows`` (dynamic shared memory from its own launch
    line): verdict, speedup, % of peak, compute-sanitizer;
(c) ``llm-tools`` / ``llm-fenced``: the same rewrite delivered by a scripted OpenAI-compatible server
    on loopback (``tests/scripted_llm.py``) through ``LLMProposer`` — as a ``verify_and_time`` tool
    call with ``smem`` (then a ``profile`` call: Nsight Compute metrics where ``ncu`` is installed),
    and as a fenced reply with a ``launch:`` line — accepted with its speedup.

``CUDA_AGENT_TEST_EXECUTOR=1`` runs it on the simulated GPU (a smoke test; its numbers mean nothing).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from agent import compare as cmp  # noqa: E402
from agent.llm import LLMProposer, LLMSettings  # noqa: E402
from agent.loop import optimize  # noqa: E402
from agent.proposer import OptimizeBudget  # noqa: E402
from agent.target import Target, target_for  # noqa: E402
from cudasrc.source import Document  # noqa: E402
from sandbox.contract import Budget, to_dict  # noqa: E402
from sandbox.executor import Executor  # noqa: E402
from server.cli.common import open_executor  # noqa: E402
from server.cli.reports import compare_report  # noqa: E402

DATA = ROOT / "tests" / "data"
ADV = DATA / "adversarial"
PAIR = DATA / "compare" / "softmax_pair.cu"
RDC_NOTE = (
    "compare compiles the rewrite as its file says (no -rdc=true): a device-side launch is a compile error"
)


@dataclass(frozen=True)
class Adversarial:
    name: str
    expected: tuple[str, ...]  # what tests/test_sandbox_gpu.py asserts for it
    original: str = "vadd_spec.cu"
    kernel: str = "vadd"
    note: str = ""

    @property
    def accepted(self) -> tuple[str, ...]:
        """The statuses that count as right through compare (the gpu test's, and a compile error
        where the gpu test adds -rdc=true)."""
        return (*self.expected, "compile_error") if self.note == RDC_NOTE else self.expected


CASES = (
    Adversarial("output_not_written", ("rejected",)),
    Adversarial("out_of_bounds_write", ("rejected",)),
    Adversarial("input_modified", ("rejected",)),
    Adversarial("side_stream", ("rejected",), note=RDC_NOTE),
    Adversarial("dynamic_parallelism", ("rejected",), note=RDC_NOTE),
    Adversarial("cached_global", ("mismatch", "rejected")),
    Adversarial("precision_downgrade", ("mismatch",)),
    Adversarial("wrong_tail", ("rejected", "mismatch")),
    Adversarial("illegal_address", ("crash",)),
    Adversarial("infinite_loop", ("timeout",)),
    Adversarial("hardcoded_size", ("rejected", "crash", "mismatch")),
    Adversarial("uninitialized_shared", ("mismatch", "rejected"), "block_sum_spec.cu", "block_sum"),
    Adversarial("shared_race", ("mismatch", "rejected"), "block_sum_spec.cu", "block_sum"),
)


class Log:
    def __init__(self, out: Path, deadline_s: float) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.path = out / "compare_check.jsonl"
        self.start = time.monotonic()
        self.deadline = self.start + deadline_s

    def late(self, case: str) -> bool:
        if time.monotonic() < self.deadline:
            return False
        self.write({"case": case, "skipped": "deadline"})
        return True

    def write(self, record: dict[str, Any]) -> None:
        record["t_s"] = round(time.monotonic() - self.start, 2)
        with self.path.open("a") as f:
            f.write(json.dumps(record, default=str) + "\n")
        print(json.dumps({k: v for k, v in record.items() if k not in ("compare", "transcript")}), flush=True)


def run_compare(
    executor: Executor, original: Path, kernel: str, with_: str, budget: Budget
) -> dict[str, Any]:
    """What ``cuda-agent compare ORIGINAL -k KERNEL --with WITH --json`` prints."""
    target, proposal, cand_doc = cmp.prepare(
        Document.from_file(original), kernel, with_, None, Document.from_file
    )
    found = cmp.compare(target, proposal, executor, candidate_path=cand_doc.path, budget=budget)
    return to_dict(compare_report(found))


def adversarial(executor: Executor, log: Log) -> None:
    for case in CASES:
        if log.late(f"adversarial:{case.name}"):
            return
        started = time.monotonic()
        out = run_compare(
            executor,
            DATA / "compare" / case.original,
            case.kernel,
            f"{ADV / case.name}.cu:{case.kernel}",
            Budget(timeout_s=8.0),
        )
        log.write(
            {
                "case": f"adversarial:{case.name}",
                "status": out["record"]["status"],
                "expected": list(case.expected),
                "as_expected": out["record"]["status"] in case.accepted,
                "reason": out["reason"],
                "note": case.note,
                "seconds": round(time.monotonic() - started, 2),
                "baseline_status": out["original"]["status"],
            }
        )


def softmax(executor: Executor, log: Log) -> None:
    if log.late("softmax"):
        return
    out = run_compare(executor, PAIR, "softmax", "softmax_rows", Budget())
    log.write(
        {
            "case": "softmax",
            "verified": out["record"]["verified"],
            "status": out["record"]["status"],
            "reason": out["reason"],
            "speedup": out["record"]["speedup"],
            "speedup_low": out["record"]["speedup_low"],
            "speedup_high": out["record"]["speedup_high"],
            "original": out["original"],
            "rewrite": out["rewrite"],
            "launch": out["launch"],
            "sanitizer": out["sanitizer"],
            "compare": out,
        }
    )


def rewrite_for_llm(target: Target) -> str:
    """``softmax_rows`` and its helpers as a model would send them: the kernel renamed ``softmax``
    (a proposal keeps the original's name), helpers first."""
    doc = Document.from_file(PAIR)
    naive, rows = doc.kernel("softmax"), doc.kernel("softmax_rows")
    assert naive is not None and rows is not None
    between = doc.data[naive.span.end_byte : rows.span.start_byte].decode()
    helpers = "\n".join(line for line in between.splitlines() if "@cuda-agent" not in line)
    kernel = (
        doc.data[rows.span.start_byte : rows.span.end_byte].decode().replace("softmax_rows(", "softmax(", 1)
    )
    return helpers.strip() + "\n\n" + kernel + "\n"


def llm(executor: Executor, log: Log, mode: str) -> None:
    from scripted_llm import Call, Fail, Say, ScriptedLLM

    case = f"llm-{mode}"
    if log.late(case):
        return
    target = target_for(Document.from_file(PAIR), "softmax")
    code = rewrite_for_llm(target)
    launch = {"grid": "rows", "block": "256", "smem": "(block / 32) * 4"}
    tools = [
        Call((("verify_and_time", {"code": code, "description": "block per row, shuffles", **launch}),)),
        Call((("profile", {"candidate": "b0-c0"}),)),
        Say("Done: one block per row."),
    ]
    fenced = Say(
        "One block per row, warp shuffles, partials in dynamic shared memory.\n"
        f"launch: grid={launch['grid']} block={launch['block']} smem={launch['smem']}\n"
        "Assumption: blockDim.x is a multiple of 32\n"
        f"```cuda\n{code}```"
    )
    refusal = '"auto" tool choice requires --enable-auto-tool-choice'

    def script(body: dict[str, Any], i: int) -> Any:
        if mode == "tools":
            return tools[i] if i < len(tools) else Say("done")
        if "tools" in body:
            return Fail(400, refusal)
        return fenced if i == 1 else Say("done")

    started = time.monotonic()
    with ScriptedLLM(script) as server:
        settings = LLMSettings(base_url=server.url, model="scripted", samples=1, max_turns=3, timeout_s=30)
        proposer = LLMProposer(settings)
        try:
            res = optimize(target, proposer, executor, budget=OptimizeBudget(wall_s=90))
        finally:
            proposer.close()
    tool_answers = [
        m["content"] for r in server.requests for m in r.body["messages"] if m.get("role") == "tool"
    ]
    best = res.best
    log.write(
        {
            "case": case,
            "outcome": res.outcome.value,
            "stop_reason": str(res.stop),
            "speedup": res.speedup,
            "speedup_low": res.speedup_low,
            "speedup_high": res.speedup_high,
            "launch": to_dict(res.launch) if res.launch else None,
            "sanitizer": best.result.sanitizer if best else "",
            "history": [
                {"id": a.candidate_id, "status": a.result.status.value, "message": a.result.message}
                for a in res.history
            ],
            "profile_answer": tool_answers[-1] if mode == "tools" and tool_answers else None,
            "seconds": round(time.monotonic() - started, 2),
        }
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--deadline", type=float, default=200.0, help="seconds for the whole run")
    args = parser.parse_args()
    log = Log(args.out, args.deadline)
    with open_executor(0) as executor:
        log.write({"case": "device", "device": to_dict(executor.device_info())})
        softmax(executor, log)
        llm(executor, log, "tools")
        llm(executor, log, "fenced")
        adversarial(executor, log)
    log.write({"case": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
