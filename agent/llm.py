"""The LLM proposer: an agent on any OpenAI-compatible chat endpoint (``vllm serve`` is the
reference deployment; hosted APIs work the same), or on an in-process ``vllm.LLM``.

Each run holds ``samples`` parallel conversations.  A conversation starts from one prompt — the
kernel with its dependencies, the spec, the device (name, SMs, measured bandwidth, compute
capability) and the baseline's measured time — and goes on for up to ``max_turns`` replies:

- with tool calling, the model calls ``compile`` (NVRTC in the sandbox's CPU pool: errors,
  registers, spills), ``verify_and_time`` (the candidate becomes a :class:`~agent.proposal.Proposal`;
  the loop's verdict comes back as the tool result: mismatch detail, timings, speedup, % of peak)
  and ``profile`` (resource usage and roofline numbers of an evaluated candidate), like the seed
  system's compile / verify / profile scripts; a reply without tool calls ends the conversation;
- without tool calling (the server refuses ``tools``, ``tools="off"``, or the in-process backend),
  each reply carries the kernel in a fenced ```cuda block, and the verdict comes back as the next
  user message.

Malformed replies (bad tool arguments, unknown tools, no code, truncated output) are answered
with what was wrong and cost a turn; a request that times out or fails is retried once, then
ends its conversation.  An endpoint that cannot be reached, refuses the key or does not know the
model raises :class:`EndpointError`, which ends the run.

Model output is only text here: candidates are compiled in the sandbox's compile pool (untrusted
compiles: no host file can be included) and run in sandbox workers, never in this process.  Every
tool result and verdict passes :func:`scrub` before it goes to the endpoint: no value of this
process's environment, no token- or key-like string, no host path but CUDA's headers.

Exceptions::

    LLMError
     ├── EndpointError      unreachable, key refused, unknown model: the run cannot go on
     ├── ToolsUnsupported   the server refuses tool calls (the proposer falls back to fenced code)
     └── ReplyError         one request failed (timeout, server error, malformed body)
"""

from __future__ import annotations

import abc
import json
import logging
import os
import re
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent.proposal import Attempt, Proposal
from agent.proposer import OptimizeContext, Proposer
from agent.target import Target
from base.errors import InputError, Unavailable, install_hint
from cudasrc import specs as spec_mod
from cudasrc.launch import LaunchChange
from sandbox.compile_pool import CompilePool
from sandbox.compiler import cuda_include_dirs
from sandbox.contract import PRECISIONS, CandidateResult, DeviceInfo, Status
from sandbox.executor import ExecutorError
from sandbox.profile import profile_text as nsight_text
from sandbox.timing import measured_text

log = logging.getLogger(__name__)

Message = dict[str, Any]


class LLMError(Unavailable, RuntimeError):
    pass


class EndpointError(LLMError):
    pass


class ToolsUnsupported(LLMError):
    pass


class ReplyError(LLMError):
    pass


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class LLMSettings:
    """How to reach and drive the model.  The API key itself is never stored here (nor logged):
    it is read when the client starts, from ``api_key_file`` if set, else the environment
    variable ``api_key_env``, else ``OPENAI_API_KEY``, else the placeholder ``EMPTY`` that a
    ``vllm serve`` without ``--api-key`` accepts."""

    base_url: str = "http://localhost:8000/v1"
    model: str = ""
    api_key_env: str = "CUDA_AGENT_API_KEY"
    api_key_file: str = ""
    temperature: float = 0.7
    samples: int = 4  # parallel conversations
    max_turns: int = 8  # replies per conversation
    max_tokens: int = 4096  # per reply
    timeout_s: float = 180.0  # per request
    tools: Literal["auto", "on", "off"] = "auto"  # auto: tool calls, fenced code if the server refuses
    backend: Literal["openai", "vllm"] = "openai"

    @classmethod
    def from_env(cls, **overrides: Any) -> LLMSettings:
        """Defaults, then ``CUDA_AGENT_LLM_URL`` / ``CUDA_AGENT_LLM_MODEL`` /
        ``CUDA_AGENT_API_KEY_FILE``, then ``overrides`` that are not None."""
        env = {
            "base_url": os.environ.get("CUDA_AGENT_LLM_URL"),
            "model": os.environ.get("CUDA_AGENT_LLM_MODEL"),
            "api_key_file": os.environ.get("CUDA_AGENT_API_KEY_FILE"),
        }
        values = {k: v for k, v in {**env, **overrides}.items() if v is not None}
        return cls(**values)

    def api_key(self) -> str:
        if self.api_key_file:
            try:
                return Path(self.api_key_file).expanduser().read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as exc:
                raise EndpointError(
                    f"cannot read the API key file {self.api_key_file}: {getattr(exc, 'strerror', None) or exc}"
                ) from exc
        return os.environ.get(self.api_key_env) or os.environ.get("OPENAI_API_KEY") or "EMPTY"


# --------------------------------------------------------------------------- chat clients


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text as the model wrote it (may be malformed)


@dataclass(frozen=True)
class ChatReply:
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = "stop"
    tokens: int = 0  # prompt + completion tokens of this request


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[Message, ...]
    tools: tuple[Message, ...] = ()  # OpenAI tool schemas; empty: plain chat
    seed: int | None = None


class ChatClient(abc.ABC):
    """Answers a batch of chat requests.  Per-request failures come back as :class:`ReplyError`
    values in the list; :class:`EndpointError` / :class:`ToolsUnsupported` are raised.  Once
    ``cancel`` is set, requests still in flight are abandoned and come back as ReplyError."""

    supports_tools: bool = True

    @abc.abstractmethod
    def complete(
        self, requests: Sequence[ChatRequest], cancel: threading.Event
    ) -> list[ChatReply | ReplyError]: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


class OpenAIChatClient(ChatClient):
    """Any OpenAI-compatible ``/v1/chat/completions`` endpoint, through the ``openai`` package
    (extra ``llm``).  Requests run concurrently, each in a daemon thread, so a cancelled run
    never waits for a slow server."""

    def __init__(self, settings: LLMSettings) -> None:
        try:
            import openai
        except ImportError as exc:
            raise EndpointError(
                f"the LLM proposer needs the `openai` package: {install_hint('llm')}"
            ) from exc
        if not settings.model:
            raise EndpointError("no model given (--model or CUDA_AGENT_LLM_MODEL)")
        self._openai = openai
        self.settings = settings
        self._client = self._new_client()

    def _new_client(self) -> Any:
        s = self.settings
        return self._openai.OpenAI(
            base_url=s.base_url, api_key=s.api_key(), timeout=s.timeout_s, max_retries=0
        )

    def complete(
        self, requests: Sequence[ChatRequest], cancel: threading.Event
    ) -> list[ChatReply | ReplyError]:
        if self._client.is_closed():  # closed by an earlier cancellation
            self._client = self._new_client()
        futures: list[Future[ChatReply]] = []
        for request in requests:
            fut: Future[ChatReply] = Future()
            threading.Thread(target=self._run, args=(request, fut), name="llm-request", daemon=True).start()
            futures.append(fut)
        pending = set(futures)
        while pending and not cancel.is_set():
            pending = {f for f in pending if not f.done()}
            if pending:
                cancel.wait(0.02)
        if pending:  # cancelled: abandon what is in flight
            self.close()
        out: list[ChatReply | ReplyError] = []
        for fut in futures:
            if not fut.done():
                out.append(ReplyError("cancelled"))
                continue
            exc = fut.exception()
            if isinstance(exc, ReplyError):
                out.append(exc)
            elif exc is not None:
                raise exc
            else:
                out.append(fut.result())
        return out

    def _run(self, request: ChatRequest, fut: Future[ChatReply]) -> None:
        try:
            fut.set_result(self._create(request))
        except BaseException as exc:
            fut.set_exception(exc)

    def _create(self, request: ChatRequest) -> ChatReply:
        o, s = self._openai, self.settings
        kwargs: dict[str, Any] = {}
        if request.tools:
            kwargs["tools"] = list(request.tools)
        if request.seed is not None:
            kwargs["seed"] = request.seed
        try:
            resp = self._client.chat.completions.create(
                model=s.model,
                messages=list(request.messages),
                temperature=s.temperature,
                max_tokens=s.max_tokens,
                **kwargs,
            )
        except o.APITimeoutError as exc:
            raise ReplyError(f"no reply within {s.timeout_s:g} s") from exc
        except (o.AuthenticationError, o.PermissionDeniedError) as exc:
            raise EndpointError(f"{s.base_url} refused the API key ({exc.status_code})") from exc
        except o.NotFoundError as exc:
            raise EndpointError(f"{s.base_url}: model {s.model!r} or the chat endpoint not found") from exc
        except o.BadRequestError as exc:
            if request.tools and "tool" in str(exc.message).lower():
                raise ToolsUnsupported(str(exc.message)) from exc
            raise ReplyError(f"request refused: {exc.message}") from exc
        except o.APIConnectionError as exc:
            if self._client.is_closed():
                raise ReplyError("cancelled") from exc
            raise EndpointError(f"cannot reach {s.base_url}: {exc}") from exc
        except o.APIStatusError as exc:
            raise ReplyError(f"server error {exc.status_code}: {exc.message}") from exc
        except (o.APIError, ValueError) as exc:  # malformed body
            raise ReplyError(f"malformed reply: {exc}") from exc
        if not getattr(resp, "choices", None):
            raise ReplyError("malformed reply: no choices")
        choice = resp.choices[0]
        calls = tuple(
            ToolCall(c.id, c.function.name, c.function.arguments or "")
            for c in (choice.message.tool_calls or ())
            if c.type == "function"
        )
        tokens = resp.usage.total_tokens if resp.usage else 0
        return ChatReply(choice.message.content or "", calls, choice.finish_reason or "stop", tokens)

    def close(self) -> None:
        try:
            self._client.close()
        except Exception:  # closing while requests are in flight may complain; they are abandoned
            log.debug("closing the LLM client", exc_info=True)


class VLLMChatClient(ChatClient):
    """An in-process ``vllm.LLM`` (extra ``vllm``) for batch use on a GPU machine: every
    conversation of a round goes into one ``LLM.chat`` call.  Fenced code only (no tools)."""

    supports_tools = False

    def __init__(self, settings: LLMSettings) -> None:
        try:
            import vllm
        except ImportError as exc:
            raise EndpointError(f"the in-process backend needs vLLM: {install_hint('vllm')}") from exc
        self._vllm = vllm
        self.settings = settings
        self._llm = vllm.LLM(model=settings.model)

    def complete(
        self, requests: Sequence[ChatRequest], cancel: threading.Event
    ) -> list[ChatReply | ReplyError]:
        if cancel.is_set():
            return [ReplyError("cancelled") for _ in requests]
        s = self.settings
        params = [
            self._vllm.SamplingParams(temperature=s.temperature, max_tokens=s.max_tokens, seed=r.seed)
            for r in requests
        ]
        outputs = self._llm.chat([list(r.messages) for r in requests], params, use_tqdm=False)
        replies: list[ChatReply | ReplyError] = []
        for out in outputs:
            gen = out.outputs[0]
            tokens = len(out.prompt_token_ids or ()) + len(gen.token_ids)
            replies.append(ChatReply(gen.text, (), gen.finish_reason or "stop", tokens))
        return replies


def make_client(settings: LLMSettings) -> ChatClient:
    return VLLMChatClient(settings) if settings.backend == "vllm" else OpenAIChatClient(settings)


# --------------------------------------------------------------------------- prompts and tools

SYSTEM = """You are an expert CUDA performance engineer. You rewrite one CUDA kernel so that it runs faster \
on the GPU described below while computing the same results.

How your kernel is judged: it replaces the original definition in its translation unit, is compiled \
with NVRTC, launched by a harness with the spec's arguments, and its outputs are compared with the \
original's on several problem sizes (including small and odd ones) and random seeds. It is timed \
interleaved with the original, with the L2 cache flushed before every sample.

Rules:
- Keep the kernel's name, template parameters and parameter list: the harness launches it as written.
- You may add __device__ helper functions, constants and macros before the kernel.
- Write every output element on every launch; handle sizes that are not multiples of the block size.
- Keep the precision of the original (no fp32 -> fp16/tf32 downgrades) unless the spec has a `precision allow=` \
line; then say which lower precision you use (`precision`). Do not rely on uninitialised memory.
- No other streams, no child kernels, no state kept between launches, no host code, no main().
- To change the launch configuration, give new grid/block/dynamic shared memory (smem, bytes) expressions \
over the spec's size variables and `block` (functions: cdiv, min, max); the harness launches with them.
- State the assumptions your rewrite relies on beyond the spec (e.g. "a and c never alias").
"""

TOOLS_HOWTO = """Work with the tools: `compile` checks that a kernel builds (no GPU, fast) and reports registers \
and spills; `verify_and_time` verifies a kernel against the original and measures it; `profile` shows \
resource usage and % of peak of a candidate you already evaluated. Iterate on what you learn. When you \
are done, reply with a short summary and no tool call."""

FENCED_HOWTO = """Reply with the complete new kernel definition (helpers first, if any) in ONE ```cuda code \
block. Before the block you may write `launch: grid=EXPR block=EXPR smem=EXPR` (any of them) to change the \
launch configuration (smem: bytes of dynamic shared memory) \
and one line `Assumption: ...` per assumption; `precision: fp16` (or tf32, bf16, mma, fast-math) if the kernel \
computes in a lower precision the spec allows. You will get the verdict and may improve on it."""


def _code_schema(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    props: dict[str, Any] = {
        "code": {"type": "string", "description": "The complete new kernel definition, helpers first."},
        **(extra or {}),
    }
    return {"type": "object", "properties": props, "required": ["code"]}


_LAUNCH_PROPS = {
    "grid": {"type": "string", "description": "New grid expression, e.g. cdiv(n, block*4). Omit to keep."},
    "block": {"type": "string", "description": "New block size expression, e.g. 512. Omit to keep."},
    "smem": {
        "type": "string",
        "description": "Dynamic shared memory in bytes, e.g. (block/32)*4 or 2*64*33*4. Omit to keep.",
    },
    "description": {"type": "string", "description": "One line: what this version changes."},
    "assumptions": {"type": "array", "items": {"type": "string"}},
    "precision": {
        "type": "array",
        "items": {"type": "string", "enum": list(PRECISIONS)},
        "description": "Lower precisions the kernel computes in, if any (only those the spec allows).",
    },
}


def tool_schemas(with_compile: bool) -> tuple[Message, ...]:
    tools: list[Message] = []
    if with_compile:
        tools.append(
            _tool("compile", "Compile a kernel with NVRTC: errors, registers, spills.", _code_schema())
        )
    tools.append(
        _tool(
            "verify_and_time",
            "Verify the kernel against the original on every problem size and seed, then time it "
            "against the original on the benchmark size.",
            _code_schema(_LAUNCH_PROPS),
        )
    )
    tools.append(
        _tool(
            "profile",
            "Profile an evaluated candidate: registers, spills, achieved bandwidth and % of peak, and, "
            "where Nsight Compute is available on the GPU machine, memory and compute throughput as % "
            "of peak, achieved occupancy, L2 hit rate and the top warp stall reasons.",
            {
                "type": "object",
                "properties": {"candidate": {"type": "string", "description": "Candidate id, e.g. b0-c1."}},
                "required": ["candidate"],
            },
        )
    )
    return tuple(tools)


def _tool(name: str, description: str, parameters: dict[str, Any]) -> Message:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def describe_device(d: DeviceInfo | None) -> str:
    if d is None:
        return "Device: unknown."
    parts = [
        f"Device: {d.name}, compute capability {d.compute_capability}, {d.sm_count} SMs",
        f"L2 {d.l2_bytes / 2**20:.0f} MiB",
        f"{d.memory_bytes / 2**30:.0f} GiB memory",
    ]
    if d.peak_bandwidth_gbps:
        parts.append(f"measured copy bandwidth {d.peak_bandwidth_gbps:.0f} GB/s")
    if d.peak_gflops:
        parts.append(f"measured fp32 GEMM {d.peak_gflops:.0f} GFLOP/s")
    return ", ".join(parts) + "."


def initial_prompt(ctx: OptimizeContext) -> str:
    t, b = ctx.target, ctx.baseline
    problems = "\n".join(
        f"- {p.label}: grid {p.launch.grid}, block {p.launch.block}, {p.launch.shared_bytes} B dynamic shared"
        for p in t.problems
    )
    return "\n\n".join(
        [
            describe_device(ctx.device),
            f"The kernel to rewrite, `{t.kernel}`:\n```cuda\n{t.definition}\n```",
            f"The translation unit it compiles in (its dependencies, in file order):\n```cuda\n{t.baseline.source}\n```",
            f"Its spec (how it is verified and benchmarked):\n```\n{t.spec_text or '(none)'}\n```",
            f"Problems (verification sizes, then the benchmark size):\n{problems}",
            "The original, measured: " + measured_text(b, detail=True),
        ]
    )


def feedback(attempt: Attempt) -> str:
    """The verdict of an attempt as the model sees it."""
    r = attempt.result
    head = f"Candidate {attempt.candidate_id}: {r.status.value}."
    if r.status is Status.OK:
        sizes = sorted({c.label for c in r.checks})
        verified = f" Verified on {', '.join(sizes)}." if sizes else ""
        if not r.timing:
            return head + verified
        return (
            f"{head}{verified} Time {measured_text(r, detail=True)}; the original {r.baseline_timing.median_ms:.4g} ms"
            if r.baseline_timing
            else f"{head}{verified} Time {measured_text(r, detail=True)}"
        ) + f". Speedup {r.speedup:.3f}x (range {r.speedup_low:.3f}-{r.speedup_high:.3f})."
    if r.status is Status.COMPILE_ERROR:
        return f"{head} Compiler output:\n{_clip(r.compile_log or r.message)}"
    if r.status is Status.MISMATCH:
        bad = [c for c in r.checks if not c.ok][:3]
        lines = [
            f"- {c.label} seed {c.seed}, output `{c.arg}`: max abs err {c.max_abs_err:.3g}, max rel err "
            f"{c.max_rel_err:.3g}, first bad index {c.first_bad_index}"
            + (f" ({c.detail})" if c.detail else "")
            for c in bad
        ]
        return "\n".join([f"{head} {r.message}".rstrip(), *lines])
    return f"{head} {_clip(r.message)}".rstrip()


def profile_text(attempt: Attempt, profiled: CandidateResult | None = None) -> str:
    """An attempt's resources and measurements, and the Nsight Compute metrics of ``profiled`` (its
    re-evaluation under ncu, when one was made)."""
    r = attempt.result
    parts = [f"Candidate {attempt.candidate_id} ({r.status.value})"]
    if r.resources:
        res = r.resources
        parts.append(
            f"{res.registers} registers, {res.spill_stores} B spill stores, {res.spill_loads} B spill loads, "
            f"{res.shared_bytes} B static shared, {res.stack_bytes} B stack"
        )
    if r.timing:
        parts.append(measured_text(r, detail=True))
        if r.timing.throttled:
            parts.append("the SM clock throttled while sampling")
    if profiled is not None:
        if profiled.profile is not None:
            parts.append(nsight_text(profiled.profile))
        elif profiled.status is Status.OK:
            parts.append("Nsight Compute metrics not available: this executor does not profile")
        else:
            why = f"{profiled.status.value}: {profiled.message}".rstrip(": ")
            parts.append(f"Nsight Compute metrics not available: the profiling run ended {why}")
    return "; ".join(parts) + "."


_SECRETS = re.compile(
    r"sk-[A-Za-z0-9_-]{12,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}|hf_[A-Za-z0-9]{20,}|(?i:bearer)\s+[\w.~+/=-]{8,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
)
_PATH = re.compile(r"(?<![\w.~-])/[^\s/\"'<>()|:,;]+(?:/[^\s/\"'<>()|:,;]*)*")
MIN_SECRET_CHARS = 6  # shorter environment values (``1``, ``C``, ``/root``) are not secrets


def scrub(text: str) -> str:
    """``text`` as an LLM endpoint may see it: every value of this process's environment of at least
    6 characters, token- and key-like strings (``sk-...``, ``ghp_...``, AWS key ids, ``Bearer ...``,
    private keys) and absolute paths on this host outside CUDA's headers replaced by placeholders."""
    allowed = cuda_include_dirs()
    kept: list[str] = []  # CUDA's header paths, set aside while the rest is scrubbed

    def keep(m: re.Match[str]) -> str:
        if not m[0].startswith(allowed):
            return m[0]
        kept.append(m[0])
        return f"\x00{len(kept) - 1}\x00"

    text = _PATH.sub(keep, text.replace("\x00", ""))
    values = {v for v in os.environ.values() if len(v) >= MIN_SECRET_CHARS}
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, "<env>")
    text = _SECRETS.sub("<secret>", text)
    roots = {"/" + d for d in os.listdir("/")}
    text = _PATH.sub(lambda m: "<path>" if "/" + m[0].split("/")[1] in roots else m[0], text)
    return re.sub("\x00(\\d+)\x00", lambda m: kept[int(m[1])], text)


def _clip(text: str, limit: int = 3000) -> str:
    return text if len(text) <= limit else text[:limit] + "\n[... truncated]"


_FENCE = re.compile(r"```[ \t]*(?:cuda|cu|cpp|c\+\+|c)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_LAUNCH_LINE = re.compile(r"^\s*launch:\s*(.+)$", re.MULTILINE | re.IGNORECASE)
_PRECISION_LINE = re.compile(r"^\s*precision:\s*(.+?)\s*$", re.MULTILINE | re.IGNORECASE)
_ASSUMPTION = re.compile(r"^\s*(?:[-*]\s*)?assumption:\s*(.+)$", re.MULTILINE | re.IGNORECASE)


def extract_code(text: str) -> str | None:
    """The last fenced block of a reply that defines a ``__global__`` function, else None."""
    blocks = [b for b in _FENCE.findall(text) if "__global__" in b]
    return blocks[-1].strip() + "\n" if blocks else None


def _fenced_launch(text: str) -> dict[str, str]:
    """The ``launch:`` line before the code block, as grid/block/smem expressions; ValueError with
    the reason when it does not parse."""
    m = _LAUNCH_LINE.search(text.split("```", 1)[0])
    return spec_mod.launch_pairs(m[1].strip()) if m else {}


class NoCode(InputError, ValueError):
    """A reply holds no fenced block defining a ``__global__`` function."""


def fenced_arguments(text: str) -> dict[str, Any]:
    """A fenced reply (:data:`FENCED_HOWTO`) as the arguments of a ``verify_and_time`` call: code,
    description (the first line of prose), assumptions, precision and the launch line's
    grid/block/smem.  Raises :class:`NoCode` when there is no kernel, ``ValueError`` with the
    reason for a launch line that does not parse."""
    code = extract_code(text)
    if code is None:
        raise NoCode("no fenced code block defining a __global__ kernel")
    head = text.split("```", 1)[0]
    prose = [
        line.strip()
        for line in head.splitlines()
        if line.strip() and not any(p.match(line) for p in (_LAUNCH_LINE, _ASSUMPTION, _PRECISION_LINE))
    ]
    args: dict[str, Any] = {
        "code": code,
        "description": prose[0][:200] if prose else "",
        "assumptions": _ASSUMPTION.findall(text),
        "precision": _PRECISION_LINE.findall(head)[-1:],
    }
    return args | _fenced_launch(text)


def _texts(value: Any) -> tuple[str, ...] | None:
    """A text or a list of texts as a tuple (None and empty: none); None when it is neither."""
    if not value:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def proposal_from_arguments(
    kernel: str,
    args: dict[str, Any],
    *,
    description: str = "",
    key: str = "",
    transcript: tuple[tuple[str, str], ...] = (),
) -> tuple[Proposal | None, str]:
    """The :class:`Proposal` that ``verify_and_time`` arguments (or :func:`fenced_arguments`)
    describe for the kernel named ``kernel``, or None and why it is not one (no definition of
    that ``__global__`` kernel in ``code``)."""
    code = args.get("code")
    name = kernel.split("<", 1)[0].split("::")[-1]
    if (
        not isinstance(code, str)
        or "__global__" not in code
        or not re.search(rf"\b{re.escape(name)}\b", code)
    ):
        return None, f"`code` must hold the complete definition of the __global__ kernel `{name}`."
    grid, block, smem = (args.get(k) for k in ("grid", "block", "smem"))
    if not all(
        v is None or (isinstance(v, str | int | float) and not isinstance(v, bool))
        for v in (grid, block, smem)
    ):
        return None, "`grid`, `block` and `smem` must be expressions (texts or integers)."
    launch = (
        LaunchChange(*(None if v is None else str(v) for v in (grid, block, smem)))
        if (grid, block, smem) != (None, None, None)
        else None
    )
    assumptions = _texts(args.get("assumptions"))
    precision_items = _texts(args.get("precision"))
    if assumptions is None or precision_items is None:
        return None, "`assumptions` and `precision` must be texts or lists of texts."
    precision = [k.strip() for item in precision_items for k in item.split(",") if k.strip()]
    description_arg = args.get("description")
    proposal = Proposal(
        code=code if code.endswith("\n") else code + "\n",
        description=description_arg if isinstance(description_arg, str) and description_arg else description,
        assumptions=assumptions,
        launch=launch,
        precision=tuple(str(k) for k in precision),
        key=key,
        transcript=transcript,
    )
    return proposal, ""


# --------------------------------------------------------------------------- the proposer


@dataclass
class _Conversation:
    index: int
    messages: list[Message]
    turns: int = 0
    failures: int = 0
    done: bool = False
    calls: list[str] = field(default_factory=list)  # tool call ids of the last reply, in order
    answers: dict[str, str] = field(default_factory=dict)  # tool call id -> tool result text
    awaiting: dict[str, str] = field(default_factory=dict)  # proposal key -> tool call id ("" fenced)

    @property
    def ready(self) -> bool:
        return not self.done and not self.awaiting


class LLMProposer(Proposer):
    """Proposals from an LLM (see the module docstring).  ``compiler`` (a
    :class:`sandbox.compile_pool.CompilePool`) enables the ``compile`` tool; :meth:`close` closes it
    and the chat client."""

    def __init__(
        self, settings: LLMSettings, client: ChatClient | None = None, compiler: CompilePool | None = None
    ) -> None:
        self.settings = settings
        self.name = f"llm:{settings.model}" if settings.model else "llm"
        self._client = client
        self._compiler = compiler
        self._tools = settings.tools != "off"
        self._tokens = 0
        self._conversations: list[_Conversation] = []
        self._attempts: dict[str, Attempt] = {}
        self._overflow: list[Proposal] = []
        self._last_error: ReplyError | None = None  # the last failed reply of any conversation
        self._target: Target | None = None

    @property
    def tokens_used(self) -> int:
        return self._tokens

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._compiler is not None:
            self._compiler.close()

    # ------------------------------------------------------------------ Proposer

    def propose(self, context: OptimizeContext, history: Sequence[Attempt], n: int) -> list[Proposal]:
        if self._client is None:
            self._client = make_client(self.settings)
        if not self._client.supports_tools:
            self._tools = False
        if self._target is not context.target:  # a new run (the proposer may be reused)
            self._start(context)
        proposals, self._overflow = self._overflow, []
        while not proposals and not context.cancel.is_set():
            ready = [c for c in self._conversations if c.ready and c.turns < self.settings.max_turns][:n]
            for c in self._conversations:
                if c.ready and c.turns >= self.settings.max_turns:
                    c.done = True
            if not ready:
                break
            proposals = self._round(context, ready)
        if (
            not proposals
            and not context.cancel.is_set()
            and self._last_error is not None
            and all(c.done and c.turns == 0 for c in self._conversations)
        ):  # not one reply in any conversation: the endpoint is broken, not the search exhausted
            raise EndpointError(f"{self.settings.base_url} answered no request: {self._last_error}")
        self._overflow = proposals[n:]  # a reply may call verify_and_time more often than asked
        return proposals[:n]

    def observe(self, attempts: Sequence[Attempt]) -> None:
        for a in attempts:
            self._attempts[a.candidate_id] = a
            for c in self._conversations:
                call_id = c.awaiting.pop(a.proposal.key, None)
                if call_id is None:
                    continue
                if call_id:
                    c.answers[call_id] = feedback(a)
                else:
                    c.messages.append({"role": "user", "content": scrub(feedback(a)) + "\n\n" + FENCED_HOWTO})
                if not c.awaiting:
                    self._flush_answers(c)

    # ------------------------------------------------------------------ conversations

    def _start(self, context: OptimizeContext) -> None:
        self._target = context.target
        self._attempts = {}
        self._last_error = None
        system = SYSTEM + "\n" + (TOOLS_HOWTO if self._tools else FENCED_HOWTO)
        prompt = initial_prompt(context)
        self._conversations = [
            _Conversation(i, [{"role": "system", "content": system}, {"role": "user", "content": prompt}])
            for i in range(max(1, self.settings.samples))
        ]

    def _round(self, context: OptimizeContext, ready: list[_Conversation]) -> list[Proposal]:
        assert self._client is not None
        tools = tool_schemas(self._compiler is not None) if self._tools else ()
        requests = [
            ChatRequest(
                tuple(c.messages), tools, seed=(context.seed * 1_000_003 + c.index * 1009 + c.turns) % 2**31
            )
            for c in ready
        ]
        try:
            replies = self._client.complete(requests, context.cancel)
        except ToolsUnsupported as exc:
            if self.settings.tools == "on":
                raise EndpointError(f"the server refuses tool calls: {exc}") from exc
            log.info("the server refuses tool calls (%s); using fenced code", exc)
            self._switch_to_fenced()
            return []
        proposals: list[Proposal] = []
        for c, reply in zip(ready, replies, strict=True):
            if isinstance(reply, ReplyError):
                if context.cancel.is_set():
                    continue
                c.failures += 1
                self._last_error = reply
                log.warning("conversation %d: %s", c.index, reply)
                if c.failures >= 2:
                    c.done = True
                continue
            c.failures = 0
            c.turns += 1
            self._tokens += reply.tokens
            proposals += self._handle(context, c, reply)
        return proposals

    def _switch_to_fenced(self) -> None:
        self._tools = False
        system = SYSTEM + "\n" + FENCED_HOWTO
        for c in self._conversations:
            c.messages[0] = {"role": "system", "content": system}

    def _handle(self, context: OptimizeContext, c: _Conversation, reply: ChatReply) -> list[Proposal]:
        msg: Message = {"role": "assistant", "content": reply.content}
        if reply.tool_calls and self._tools:
            msg["tool_calls"] = [
                {"id": t.id, "type": "function", "function": {"name": t.name, "arguments": t.arguments}}
                for t in reply.tool_calls
            ]
        c.messages.append(msg)
        if self._tools:
            return self._handle_tools(context, c, reply)
        return self._handle_fenced(context, c, reply)

    def _handle_tools(self, context: OptimizeContext, c: _Conversation, reply: ChatReply) -> list[Proposal]:
        if not reply.tool_calls:
            if reply.finish_reason == "length":
                c.messages.append(
                    {"role": "user", "content": "Your reply was cut off. Be shorter; use the tools."}
                )
            else:
                c.done = True  # the model's final answer
            return []
        c.calls = [t.id for t in reply.tool_calls]
        c.answers = {}
        proposals = []
        for t in reply.tool_calls:
            try:
                args = json.loads(t.arguments or "{}")
                if not isinstance(args, dict):
                    raise ValueError("arguments must be a JSON object")
            except RecursionError:
                c.answers[t.id] = "Error: the arguments are nested too deeply."
                continue
            except ValueError as exc:
                c.answers[t.id] = f"Error: the arguments are not a valid JSON object ({exc})."
                continue
            if t.name == "verify_and_time":
                proposal, error = self._proposal(context, c, t.id, args)
                if proposal is None:
                    c.answers[t.id] = f"Error: {error}"
                else:
                    c.awaiting[proposal.key] = t.id
                    proposals.append(proposal)
            elif t.name == "compile" and self._compiler is not None:
                c.answers[t.id] = self._compile(context, str(args.get("code", "")))
            elif t.name == "profile":
                c.answers[t.id] = self._profile(context, str(args.get("candidate", "")))
            else:
                c.answers[t.id] = f"Error: there is no tool {t.name!r}."
        if not c.awaiting:
            self._flush_answers(c)
        return proposals

    def _flush_answers(self, c: _Conversation) -> None:
        for call_id in c.calls:
            c.messages.append(
                {"role": "tool", "tool_call_id": call_id, "content": scrub(c.answers.get(call_id, ""))}
            )
        c.calls, c.answers = [], {}

    def _handle_fenced(self, context: OptimizeContext, c: _Conversation, reply: ChatReply) -> list[Proposal]:
        try:
            args = fenced_arguments(reply.content)
        except NoCode:
            cut = " Your reply was cut off." if reply.finish_reason == "length" else ""
            c.messages.append(
                {"role": "user", "content": f"No kernel found in your reply.{cut} " + FENCED_HOWTO}
            )
            return []
        except ValueError as exc:
            c.messages.append(
                {"role": "user", "content": f"Error in the launch line: {exc}. " + FENCED_HOWTO}
            )
            return []
        proposal, error = self._proposal(context, c, "", args)
        if proposal is None:
            c.messages.append({"role": "user", "content": f"Error: {error} " + FENCED_HOWTO})
            return []
        c.awaiting[proposal.key] = ""
        return [proposal]

    def _proposal(
        self, context: OptimizeContext, c: _Conversation, call_id: str, args: dict[str, Any]
    ) -> tuple[Proposal | None, str]:
        return proposal_from_arguments(
            context.target.kernel,
            args,
            description=f"LLM sample {c.index}, turn {c.turns}",
            key=f"{c.index}:{c.turns}:{call_id}",
            transcript=tuple((m["role"], _message_text(m)) for m in c.messages),
        )

    def _profile(self, context: OptimizeContext, cid: str) -> str:
        """The ``profile`` tool: an evaluated candidate's numbers, plus Nsight Compute metrics from
        a re-run under ncu (``context.profile``) when it verified."""
        a = self._attempts.get(cid)
        if a is None:
            return "Error: no evaluated candidate with that id."
        if a.result.status is not Status.OK or context.profile is None:
            return profile_text(a)
        try:
            return profile_text(a, context.profile(a.proposal))
        except ExecutorError as exc:
            log.warning("profile tool failed: %s", exc)
            return profile_text(a) + f" Nsight Compute metrics not available: {exc}."

    def _compile(self, context: OptimizeContext, code: str) -> str:
        assert self._compiler is not None
        t = context.target
        cc = context.device.compute_capability.replace(".", "") if context.device else "90"
        try:
            compiled = self._compiler.submit(
                t.unit_with(code),
                filename=t.baseline.filename,
                name_expressions=[t.kernel],
                arch=f"sm_{cc}",
                options=t.baseline.options,
                headers=t.baseline.headers,
            ).result(timeout=120)
        except Exception as exc:  # the pool died or timed out: the model learns nothing from it
            log.warning("compile tool failed: %s", exc)
            return f"Error: the compiler is unavailable ({exc})."
        r = compiled.result
        if not r.ok:
            return "Compilation failed:\n" + _clip(r.log)
        res = next(iter(r.resources.values()), None)
        usage = (
            f" {res.registers} registers, {res.spill_stores} B spill stores, {res.shared_bytes} B static shared."
            if res
            else ""
        )
        return f"Compiled.{usage}" + (f"\n{_clip(r.log)}" if r.log.strip() else "")


def _message_text(m: Message) -> str:
    text = str(m.get("content") or "")
    if m.get("tool_calls"):
        text += "".join(
            f"\n[tool call {c['function']['name']}] {c['function']['arguments']}" for c in m["tool_calls"]
        )
    return text
