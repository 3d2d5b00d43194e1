"""Prompts for a task, and a model's completion back to a candidate.

The prompt carries what a model needs and nothing measured: the kernel, the translation unit it
compiles in, its spec, the problem sizes and the device's fixed properties (name, compute
capability, SMs, L2, memory), so the same task renders the same prompt on every machine.  It asks
for the optimize loop's fenced reply format (:data:`agent.llm.FENCED_HOWTO`).

A completion is text (or chat messages, whose last assistant message counts) holding either a
``verify_and_time`` tool call (OpenAI ``tool_calls``, or ``<tool_call>{json}</tool_call>`` in the
text as Hermes/Qwen templates write it) or a fenced ```cuda block.  It becomes a
:class:`~agent.proposal.Proposal` through the same functions the LLM proposer uses, or a
:class:`NoCode` with the reason.  For a PyTorch task the answer is the last ```python block (or
the ``code`` of a ``verify_and_time`` call) that parses and defines ``class ModelNew`` at its top
level (:func:`parse_torch`).  Completions are only ever parsed here, never run.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from dataclasses import dataclass, replace
from typing import Any

from agent.llm import FENCED_HOWTO, SYSTEM, NoCode, describe_device, fenced_arguments, proposal_from_arguments
from agent.proposal import Proposal
from cudasrc.source import Document
from learning.tasks import AnyTask, Task, TorchTask
from learning.wire import Completion
from sandbox.contract import DeviceInfo
from sandbox.screen import ALLOWED_MODULES, FORBIDDEN_NAMES

TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
TOOL_NAME = "verify_and_time"


TORCH_SYSTEM = (
    "You are an expert CUDA and PyTorch performance engineer. You rewrite PyTorch models into "
    "faster ones with custom CUDA kernels, computing the same outputs to fp32 accuracy."
)
TORCH_HOWTO = (
    "Write `class ModelNew(torch.nn.Module)`: the same constructor arguments as `Model`, a `forward` "
    "taking the same inputs and returning the same outputs (shapes, dtypes, values within fp32 "
    "roundoff), faster on this device. Custom kernels: CUDA through "
    "`torch.utils.cpp_extension.load_inline`, or Triton (`import triton`, `triton.language`, "
    "`@triton.jit`, autotune); CuTe DSL (`cutlass`) and TileLang where installed. Rules: fp32 stays "
    "fp32 (TF32, half precision and changing torch's precision settings are refused); inputs must "
    "not be modified; outputs are plain tensors, complete on the caller's stream when `forward` "
    "returns (work on other streams is joined first); the time counts all the device's work until "
    "it is idle; import only torch, the kernel languages above and the standard modules "
    f"{', '.join(sorted(ALLOWED_MODULES - {'torch', '__future__'}))}; "
    f"no {'/'.join(sorted(FORBIDDEN_NAMES))}; no dunder names, attributes or definitions but "
    "`__init__`; no private (`_x`) attributes but your own; attributes are assigned only as "
    "`self.NAME = ...` inside your own classes' methods (not `self.a.b`, not torch's, not through "
    "another name). Reply with one ```python block holding the whole module "
    "(imports, kernels, `ModelNew`)."
)
_PY_FENCE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def _fixed(device: DeviceInfo | None) -> DeviceInfo | None:
    """``device`` without its measured ceilings (a prompt is the same on every machine)."""
    return (
        replace(device, peak_bandwidth_gbps=0.0, peak_gflops=0.0, peak_tensor_gflops=0.0) if device else None
    )


@dataclass(frozen=True)
class PromptRow:
    """One row of a trainer's dataset (``cuda-agent reward tasks --prompts``, one JSON line each):
    the task (``name@hash``), its split and the chat prompt (``[{role, content}, ...]``)."""

    task: str
    split: str
    prompt: list[dict[str, str]]


def prompt_row(task: AnyTask) -> PromptRow:
    return PromptRow(task.ref, task.split, prompt_messages(task))


def prompt_messages(task: AnyTask, device: DeviceInfo | None = None) -> list[dict[str, str]]:
    """The chat prompt for ``task`` on ``device`` (its fixed properties only)."""
    fixed = _fixed(device)
    if isinstance(task, TorchTask):
        user = "\n\n".join(
            [
                describe_device(fixed) if fixed else "Device: an NVIDIA GPU.",
                f"The PyTorch model to make faster (`get_inputs()` gives the benchmark inputs):\n```python\n{task.text}\n```",
                TORCH_HOWTO,
            ]
        )
        return [{"role": "system", "content": TORCH_SYSTEM}, {"role": "user", "content": user}]
    t = task.target
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


def prompt_text(task: AnyTask, device: DeviceInfo | None = None) -> str:
    """:func:`prompt_messages` as one text (for trainers without chat templates)."""
    return "\n\n".join(m["content"] for m in prompt_messages(task, device))


@dataclass(frozen=True)
class ParsedCompletion:
    """A completion read: the proposal (``source``: a PyTorch task's ``ModelNew`` module), or
    why there is none (``no_code``)."""

    proposal: Proposal | None
    no_code: str = ""
    source: str = ""


def parse_torch(completion: Completion) -> ParsedCompletion:
    """The ``ModelNew`` module in ``completion`` for a PyTorch task: the ``code`` of the last
    ``verify_and_time`` call, else the last fenced block that parses and defines ``class ModelNew``."""
    text, calls = _content(completion)
    calls += _text_tool_calls(text)
    for call in reversed(calls):
        args = call.get("arguments")
        if call.get("name") != TOOL_NAME:
            continue
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except (ValueError, RecursionError):
                return ParsedCompletion(
                    None, f"no code: the {TOOL_NAME} arguments are not JSON (or nested too deeply)"
                )
        code = args.get("code") if isinstance(args, dict) else None
        if isinstance(code, str) and _defines_model_new(code):
            return ParsedCompletion(None, source=code)
        return ParsedCompletion(
            None, f"no code: the {TOOL_NAME} call holds no Python defining class ModelNew"
        )
    blocks = [b for b in _PY_FENCE.findall(text) if _defines_model_new(b)]
    if not blocks:
        return ParsedCompletion(
            None, "no code: no fenced Python block that parses and defines class ModelNew"
        )
    return ParsedCompletion(None, source=blocks[-1].strip() + "\n")


def _syntax_tree(code: str) -> ast.Module | None:
    """``code`` parsed, or None when it does not parse (a syntax error, a null byte, or nesting
    deeper than the parser's stack: 200,000 unary minuses are a ``MemoryError`` there)."""
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def _defines_model_new(code: str) -> bool:
    tree = _syntax_tree(code)
    return tree is not None and any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)


def torch_cache_key(task: TorchTask, source: str) -> str:
    """What identifies a PyTorch answer's evaluation: the task version and the answer's syntax
    tree (layout and comments do not count), walked without recursion (a 2,000-term ``1+1+...``
    chain is 2,000 nested nodes: ``ast.dump`` would overflow the interpreter's stack)."""
    h = hashlib.sha256(task.ref.encode() + b"\0")
    tree = _syntax_tree(source)
    stack: list[Any] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.AST):  # a node: its type, then its fields (never its positions)
            h.update(type(node).__name__.encode() + b"(")
            stack.extend(getattr(node, name, None) for name in reversed(node._fields))
        elif isinstance(node, list):
            h.update(b"[%d;" % len(node))
            stack.extend(reversed(node))
        else:  # a constant, a name: repr delimits it
            h.update(repr(node).encode("utf-8", "surrogatepass") + b",")
    return h.hexdigest()


def parse(completion: Completion, task: Task) -> ParsedCompletion:
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
            except (ValueError, RecursionError):
                return ParsedCompletion(
                    None, f"no code: the {TOOL_NAME} arguments are not JSON (or nested too deeply)"
                )
        if not isinstance(args, dict):
            return ParsedCompletion(None, f"no code: the {TOOL_NAME} arguments are not a JSON object")
        proposal, why = proposal_from_arguments(kernel, args)
        return ParsedCompletion(proposal, "" if proposal else f"no code: {why}")
    try:
        args = fenced_arguments(text)
    except NoCode as exc:
        return ParsedCompletion(None, f"no code: {exc}")
    except ValueError as exc:
        return ParsedCompletion(None, f"no code: the launch line does not parse ({exc})")
    proposal, why = proposal_from_arguments(kernel, args)
    return ParsedCompletion(proposal, "" if proposal else f"no code: {why}")


def _content(completion: Completion) -> tuple[str, list[dict[str, Any]]]:
    """The text and OpenAI-style tool calls (as {name, arguments}) of a completion."""
    if isinstance(completion, str):
        return completion, []
    messages = [m for m in completion if isinstance(m, dict)]
    last = next((m for m in reversed(messages) if m.get("role", "assistant") == "assistant"), {})
    calls = []
    tool_calls = last.get("tool_calls")
    for c in tool_calls if isinstance(tool_calls, list) else ():
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
        except (ValueError, RecursionError):
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
