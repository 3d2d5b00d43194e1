"""A scripted OpenAI-compatible chat server on loopback: real HTTP (starlette + uvicorn), canned
replies, every request recorded.  Tests drive :mod:`agent.llm` against it.

A script is a function of the request body (and the 0-based request number) returning a step:

- :class:`Say` — an assistant message with text;
- :class:`Call` — an assistant message with tool calls (arguments as a dict, or raw text to
  send malformed JSON);
- :class:`Fail` — an HTTP error with an OpenAI-style error body;
- :class:`Garbage` — HTTP 200 with a body that is not a chat completion;
- :class:`Slow` — wait, then answer with another step (timeouts, cancellation mid-request).

A plain list of steps is answered in order (then HTTP 500 "script exhausted").
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route


@dataclass(frozen=True)
class Say:
    content: str
    finish_reason: str = "stop"


@dataclass(frozen=True)
class Call:
    calls: tuple[tuple[str, dict[str, Any] | str], ...]  # (tool name, arguments)
    content: str = ""


@dataclass(frozen=True)
class Fail:
    status: int
    message: str


@dataclass(frozen=True)
class Garbage:
    body: str


@dataclass(frozen=True)
class Slow:
    seconds: float
    then: Step


Step = Say | Call | Fail | Garbage | Slow
Script = Callable[[dict[str, Any], int], Step]


@dataclass
class Recorded:
    body: dict[str, Any]
    authorization: str


@dataclass
class ScriptedLLM:
    script: Script | Sequence[Step]
    requests: list[Recorded] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> ScriptedLLM:
        app = Starlette(routes=[Route("/v1/chat/completions", self._chat, methods=["POST"])])
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        while not self._server.started:
            threading.Event().wait(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.should_exit = True
        self._thread.join(timeout=5)

    def _step(self, body: dict[str, Any], index: int) -> Step:
        if callable(self.script):
            return self.script(body, index)
        return self.script[index] if index < len(self.script) else Fail(500, "script exhausted")

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        with self._lock:
            self.requests.append(Recorded(body, request.headers.get("authorization", "")))
            index = len(self.requests) - 1
        step = self._step(body, index)
        while isinstance(step, Slow):
            await asyncio.sleep(step.seconds)
            step = step.then
        if isinstance(step, Fail):
            error = {"error": {"message": step.message, "type": "invalid_request_error", "code": step.status}}
            return JSONResponse(error, status_code=step.status)
        if isinstance(step, Garbage):
            return PlainTextResponse(step.body, media_type="application/json")
        return JSONResponse(_completion(body, step))


def _completion(body: dict[str, Any], step: Say | Call) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": step.content}
    finish = step.finish_reason if isinstance(step, Say) else "tool_calls"
    if isinstance(step, Call):
        message["tool_calls"] = [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
            for i, (name, args) in enumerate(step.calls)
        ]
    prompt = sum(len(str(m.get("content") or "")) for m in body.get("messages", [])) // 4
    completion = len(json.dumps(message)) // 4
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", ""),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }
