"""Prompts for a task, and a model's completion back to a candidate.

The prompt carries what a model needs and nothing measured: the kernel, the translation unit it
compiles in, its spec, the problem sizes and the device's fixed properties (name, compute
capability, SMs, L2, memory), so the same task renders the same prompt on every machine.  It asks
for the optimize loop's fenced reply format (:data:`agent.llm.FENCED_HOWTO`).

A completion is text (or chat messages, whose last assistant message counts) holding either a
``verify_and_time`` tool call (OpenAI ``tool_calls``, or ``<tool_call>{json}</tool_call>`` in the
text as Hermes/Qwen templates write it) or a fenced ```cuda block.  It becomes a
:class:`~agent.loop.Proposal` through the same functions the LLM proposer uses, or a
:class:`NoCode` with the reason.  Completions are only ever parsed here, never run.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any

from agent.llm import FENCED_HOWTO, SYSTEM, NoCode, describe_device, fenced_arguments, proposal_from_arguments
from agent.loop import Proposal
from agent.reward.tasks import Task
from agent.source import Document
from sandbox.contract import DeviceInfo

TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
TOOL_NAME = "verify_and_time"

Completion = str | list[dict[str, Any]]


def prompt_messages(task: Task, device: DeviceInfo | None = None) -> list[dict[str, str]]:
    """The chat prompt for ``task`` on ``device`` (its fixed properties only)."""
    t = task.target
    fixed = (
        replace(device, peak_bandwidth_gbps=0.0, peak_gflops=0.0, peak_tensor_gflops=0.0) if device else None
    )
    problems = "\n".join(
        f"- {p.label}: grid {p.launch.grid}, block {p.launch.block}, {p.launch.shared_bytes} B dynamic shared"
        for p in t.problems
    )
    user = "\n\n".join(
        [
            describe_device(fixed) if fixed else "Device: an NVIDIA GPU.",
            f"The kernel to rewrite, `{t.kernel}`:\n```cuda\n{t.definition}\n```",
            f"The translation unit it compiles in (its dependencies, in file order):\n```cuda\n{t.baseline.source}\n```",
            f"Its spec (how it is verified and benchmarked):\n```\n{t.spec_text or '(none)'}\n```",
            f"Problems (verification sizes, then the benchmark size):\n{problems}",
            FENCED_HOWTO,
        ]
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def prompt_text(task: Task, device: DeviceInfo | None = None) -> str:
    """:func:`prompt_messages` as one text (for trainers without chat templates)."""
    return "\n\n".join(m["content"] for m in prompt_messages(task, device))


@dataclass(frozen=True)
class Parsed:
    """A completion read: the proposal, or why there is none (``no_code``)."""

    proposal: Proposal | None
    no_code: str = ""


def parse(completion: Completion, task: Task) -> Parsed:
    """The candidate in ``completion`` for ``task``: the last ``verify_and_time`` tool call, else
    the last fenced block defining a ``__global__`` kernel."""
    text, calls = _content(completion)
    calls += _text_tool_calls(text)
    kernel = task.target.kernel
    for call in reversed(calls):
        if call.get("name") != TOOL_NAME:
            continue
        args = call.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                return Parsed(None, f"no code: the {TOOL_NAME} arguments are not JSON")
        if not isinstance(args, dict):
            return Parsed(None, f"no code: the {TOOL_NAME} arguments are not a JSON object")
        proposal, why = proposal_from_arguments(kernel, args)
        return Parsed(proposal, "" if proposal else f"no code: {why}")
    try:
        args = fenced_arguments(text)
    except NoCode as exc:
        return Parsed(None, f"no code: {exc}")
    except ValueError as exc:
        return Parsed(None, f"no code: the launch line does not parse ({exc})")
    proposal, why = proposal_from_arguments(kernel, args)
    return Parsed(proposal, "" if proposal else f"no code: {why}")


def _content(completion: Completion) -> tuple[str, list[dict[str, Any]]]:
    """The text and OpenAI-style tool calls (as {name, arguments}) of a completion."""
    if isinstance(completion, str):
        return completion, []
    messages = [m for m in completion if isinstance(m, dict)]
    last = next((m for m in reversed(messages) if m.get("role", "assistant") == "assistant"), {})
    calls = []
    for c in last.get("tool_calls") or ():
        fn = c.get("function", c) if isinstance(c, dict) else {}
        if isinstance(fn, dict):
            calls.append({"name": fn.get("name"), "arguments": fn.get("arguments")})
    return str(last.get("content") or ""), calls


def _text_tool_calls(text: str) -> list[dict[str, Any]]:
    """``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` spans of a text, in order."""
    calls, pos = [], 0
    while (start := text.find(TOOL_CALL_OPEN, pos)) >= 0:
        end = text.find(TOOL_CALL_CLOSE, start)
        body = text[start + len(TOOL_CALL_OPEN) : end if end >= 0 else len(text)]
        pos = end + len(TOOL_CALL_CLOSE) if end >= 0 else len(text)
        try:
            call = json.loads(body)
        except ValueError:
            continue
        if isinstance(call, dict):
            calls.append(call)
    return calls


def normalized(code: str) -> str:
    """``code`` as its tokens separated by single spaces, comments dropped: two completions that
    differ only in layout or comments normalize alike."""
    doc = Document(code)
    tokens: list[str] = []
    stack = [doc.tree.root_node]
    while stack:
        node = stack.pop()
        if node.type == "comment":
            continue
        if node.child_count == 0:
            tokens.append(" ".join(doc.node_text(node).split()))
        else:
            stack.extend(reversed(node.children))
    return " ".join(t for t in tokens if t)


def cache_key(task: Task, proposal: Proposal) -> str:
    """What identifies an evaluation: the task version and the proposal's normalized source,
    launch change, kernel name, options and claimed precision."""
    parts = (
        task.ref,
        normalized(proposal.code),
        proposal.launch,
        proposal.kernel,
        proposal.options,
        proposal.precision,
    )
    return hashlib.sha256(repr(parts).encode()).hexdigest()
