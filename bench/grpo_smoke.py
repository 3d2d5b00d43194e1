"""GRPO through TRL against the reward service, on this machine's GPU (issue 27's smoke run).

Phase ``canned`` (no TRL needed): ``cuda-agent reward serve``'s app on loopback (token, local GPU
sandbox), and the TRL reward function (:func:`learning.client.trl_reward_func`) called exactly
as ``GRPOTrainer`` calls it, on canned completions for the ``vadd_poor_block`` task: the
sandbox tests' adversarial ``input_modified`` kernel, a kernel that does not compile, the original,
and the built-in engine's best rewrite.  Expected: adversarial < broken < original < engine winner.

Phase ``grpo``: a tiny randomly initialised Llama (built from a config; a byte-level tokenizer
built in process; nothing is downloaded) trained for ``--steps`` GRPO steps by TRL's
``GRPOTrainer`` with the async reward function over the same service, prompts from
``cuda-agent reward tasks --prompts`` (the completions are junk: this proves the plumbing); the
rewards TRL logs are written as they come.

The device has transformers/accelerate but not TRL or datasets: carry these wheels (pure Python
unless said) and install them with ``--no-deps`` into a ``--target`` folder first:
  trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 xxhash==4.1.0 (cp312 manylinux)
  pyarrow==26.0.1 (cp312 manylinux, ~40 MB) fsspec==2026.9.0, and pandas==3.1.1 (cp312 manylinux)
  only if ``import pandas`` fails there; plus the editor-side wheels of bench/README.md (starlette,
  uvicorn, cattrs, tree-sitter...).

JSON lines to ``OUT/grpo_smoke.jsonl`` as they go; stops itself after ``--deadline`` (default 420 s).

    python3 bench/grpo_smoke.py --out $OUT/grpo [--steps 4] [--deadline 420] [--simulate]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from reward_bench import engine_rewrites, fenced  # noqa: E402

from base.asgi import make_server  # noqa: E402
from base.http import listen  # noqa: E402
from learning.client import trl_async_reward_func, trl_reward_func  # noqa: E402
from learning.completion import prompt_text  # noqa: E402
from learning.engine import RewardEngine  # noqa: E402
from learning.service import RewardService  # noqa: E402
from learning.tasks import DEFAULT_TASKS, TaskSet  # noqa: E402
from sandbox.executor import Executor  # noqa: E402

TOKEN = "grpo-smoke-token"
TASK = "vadd_poor_block"


class Out:
    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "grpo_smoke.jsonl"
        self.lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, default=str)
        with self.lock, self.path.open("a") as f:
            f.write(line + "\n")
        print(line[:400], flush=True)


def serve(executor: Executor, tasks: TaskSet) -> tuple[str, Any]:
    engine = RewardEngine(executor, tasks, workers=2)
    app = RewardService(engine, token=TOKEN)
    sock = listen("127.0.0.1", 0)
    server = make_server(app.app, log_level="warning")
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the reward service did not come up")
        time.sleep(0.05)
    return f"http://127.0.0.1:{sock.getsockname()[1]}", server


def canned(out: Out, url: str, tasks: TaskSet, executor: Executor) -> None:
    task = tasks.resolve(TASK)
    reward = trl_reward_func(url, TOKEN)
    rewrites = engine_rewrites(task, executor, 8)
    scores = reward(
        prompts=["p"] * len(rewrites),
        completions=rewrites,
        completion_ids=None,
        task=[task.ref] * len(rewrites),
    )
    ranked = sorted(
        ((s, c) for s, c in zip(scores, rewrites, strict=True) if s is not None), key=lambda x: -x[0]
    )
    winner = ranked[0][1] if ranked else fenced(task.target.definition)
    adversarial = (ROOT / "tests" / "data" / "adversarial" / "input_modified.cu").read_text()
    broken = task.target.definition.replace("{", "{\n    this_name_is_undefined = 1;", 1)
    kinds = ["adversarial", "broken", "original", "engine_winner"]
    completions = [fenced(adversarial), fenced(broken), fenced(task.target.definition), winner]
    t0 = time.perf_counter()
    got = reward(
        prompts=[prompt_text(task)] * 4,
        completions=completions,
        completion_ids=[[0]] * 4,
        task=[task.ref] * 4,
    )
    ordered = None not in got and all(got[i] < got[i + 1] for i in range(len(got) - 1))  # type: ignore[operator]
    out.write(
        {
            "phase": "canned",
            "task": task.ref,
            "rewards": dict(zip(kinds, got, strict=True)),
            "expected_order": kinds,
            "ordered": ordered,
            "engine_rewrite_rewards": scores,
            "seconds": time.perf_counter() - t0,
        }
    )


def tiny_model_and_tokenizer() -> tuple[Any, Any]:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<pad>", "<s>", "</s>", "<unk>"]
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {t: i for i, t in enumerate([*specials, *alphabet])}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    tokenizer.padding_side = "left"
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=16384,
        pad_token_id=vocab["<pad>"],
        bos_token_id=vocab["<s>"],
        eos_token_id=vocab["</s>"],
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(config), tokenizer


def grpo(out: Out, url: str, tasks: TaskSet, steps: int, deadline: float) -> None:
    from datasets import Dataset
    from datasets.table import InMemoryTable
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer = tiny_model_and_tokenizer()
    picked = [t for t in tasks if t.split == "train"][:4]
    rows = [{"prompt": prompt_text(t)[-1500:], "task": t.ref} for t in picked for _ in range(2)]
    calls: list[dict[str, Any]] = []
    inner = trl_async_reward_func(url, TOKEN)

    async def cuda_agent_reward(prompts: Any, completions: Any, completion_ids: Any = None, **kw: Any) -> Any:
        rewards = await inner(prompts=prompts, completions=completions, completion_ids=completion_ids, **kw)
        calls.append({"n": len(rewards), "columns": sorted(kw), "rewards": rewards})
        out.write(
            {"phase": "reward_call", "n": len(rewards), "dataset_columns": sorted(kw), "rewards": rewards}
        )
        return rewards

    class Log(TrainerCallback):  # type: ignore[misc]
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            out.write({"phase": "grpo_log", "step": state.global_step, "logs": logs})

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if time.monotonic() > deadline:
                control.should_training_stop = True

    config = GRPOConfig(
        output_dir=str(Path(out.path).parent / "grpo_run"),
        learning_rate=1e-4,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=48,
        max_steps=steps,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[cuda_agent_reward],
        args=config,
        # A fixed fingerprint: on the device, hashing the table with dill (what `from_list` does to
        # make one) failed on pyarrow 26's `MonthDayNano` type; nothing here needs the cache.
        train_dataset=Dataset(InMemoryTable.from_pylist(rows), fingerprint="grpo-smoke"),
        processing_class=tokenizer,
        callbacks=[Log()],
    )
    t0 = time.perf_counter()
    trainer.train()
    out.write(
        {
            "phase": "grpo",
            "steps": trainer.state.global_step,
            "reward_calls": len(calls),
            "rewards_seen": sum(c["n"] for c in calls),
            "all_rewards_numbers": all(r is not None for c in calls for r in c["rewards"]),
            "seconds": time.perf_counter() - t0,
        }
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--deadline", type=float, default=420.0)
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--simulate", action="store_true", help="the simulated GPU for the sandbox")
    args = ap.parse_args()
    deadline = time.monotonic() + args.deadline
    out = Out(args.out)
    if args.simulate:
        from sandbox.testing import FakeExecutor

        executor: Executor = FakeExecutor()
    else:
        from server.cli.common import open_executor

        executor = open_executor(args.gpu)
    tasks = TaskSet.load([DEFAULT_TASKS])
    status = 0
    server = None
    try:
        url, server = serve(executor, tasks)
        for name, phase in (
            ("canned", lambda: canned(out, url, tasks, executor)),
            ("grpo", lambda: grpo(out, url, tasks, args.steps, deadline - 30)),
        ):
            if time.monotonic() > deadline - 30:
                out.write({"phase": name, "skipped": "deadline"})
                continue
            try:
                phase()
            except Exception as exc:
                status = 1
                out.write(
                    {
                        "phase": name,
                        "error": f"{type(exc).__name__}: {exc}",
                        "trace": traceback.format_exc(),
                    }
                )
    finally:
        if server is not None:
            server.should_exit = True
        executor.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
