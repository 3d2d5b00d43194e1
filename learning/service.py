"""``cuda-agent reward serve``: the reward engine over HTTP, for RL trainers.

Endpoints (JSON; every one but ``/health`` needs ``Authorization: Bearer <token>`` when the
service has a token — the toolkit's middleware, :class:`base.asgi.BearerAuth`)::

    POST /reward    {"id": "...", "deadline_s": 300,
                     "items": [{"key": "...", "task": "name@hash", "completion": "..." | [messages],
                                "deadline_s": 60}, ...]}
                    -> {"id", "reward_version", "results": [Scored, ...]}   (in item order)
    POST /openrlhf  {"query": [...], "prompts": [...], "labels": ["name@hash", ...]}
                    -> {"rewards": [...], "scores": [...], "extra_logs": {...}}
    GET  /tasks     [?split=train|eval] [&prompts=1]   the task set (and each task's prompt)
    GET  /stats     rewards/s, queue, cache, sandbox requests
    GET  /health

A request ``id`` makes a retry idempotent: the same request again attaches to the running one or
gets its answer; a running id with another body is a 409.  Limits, as the worker's: the body size
(413), the items and completion sizes and the deadlines (422 naming the field), JSON nesting
(422), requests in flight per token and in all (429), request bodies held at once in all (503: a
global memory cap), a task the service does not have (422).  A deadline counts from when the
request's body arrived and bounds reading the completions as well as evaluating them: a batch is
answered within its deadline plus the time to parse and answer it (``tests/test_reward_deadlines.py``).

Completions are untrusted text: they are parsed here and only ever reach the sandbox inside an
``EvalRequest`` (:mod:`learning.engine`), which checks them as the worker checks any request.
OpenRLHF sends no ``Authorization`` header: serve it on the trainer's loopback, or behind a proxy
that adds one.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp

from agent.trajectory import FAILED, HACK, REWARD_VERSION
from base.asgi import AsciiJSON, BearerAuth, error_response, read_body, requester
from base.http import HEALTH_PATH
from learning.completion import prompt_messages
from learning.engine import RewardEngine
from learning.tasks import TaskError
from learning.wire import Item, RewardResponse, Scored
from sandbox.contract import to_dict
from sandbox.executor import ExecutorError


@dataclass(frozen=True)
class RewardLimits:
    max_body_bytes: int = 32 << 20
    max_items: int = 1024  # per request
    max_completion_bytes: int = 256 << 10  # per item (UTF-8)
    max_per_client: int = 16  # requests in flight per token (per credential, not per address)
    max_in_flight: int = 64  # requests in flight in all
    max_inflight_bytes: int = 96 << 20  # request bodies held at once, in all (each <= max_body_bytes)
    max_deadline_s: float = 1800.0  # and the default deadline of a request
    cached_responses: int = 256  # finished answers kept for repeated request ids...
    cached_results: int = 16_384  # ...holding at most this many items in all (memory kept after)
    missing_reward: float = 0.0  # what /openrlhf reports for an item that got no reward
    max_json_depth: int = 64  # nesting of a body (a completion's tool-call arguments are text: not counted)


@dataclass
class _Ticket:
    """An admitted request: whose (:func:`_requester`), the body bytes it holds, when it arrived."""

    key: str
    size: int
    arrived: float


class _Invalid(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class RewardService:
    """The HTTP application over one :class:`RewardEngine`; ``app`` is the ASGI application."""

    def __init__(
        self,
        engine: RewardEngine,
        *,
        token: str | None,
        limits: RewardLimits = RewardLimits(),
        isolation: str = "none",
    ) -> None:
        """``isolation``: how the compiles of this service's executor are isolated from the host
        (:func:`sandbox.compile_pool.require_isolation`), said in ``/health``."""
        self.engine = engine
        self.isolation = isolation
        self.limits = limits
        self.clients: dict[str, int] = {}  # requests in flight by requester key (_requester)
        self.inflight_bytes = 0
        self.running: dict[str, tuple[str, asyncio.Future[list[Scored]]]] = {}
        self.done: OrderedDict[str, tuple[str, list[Scored]]] = OrderedDict()
        app = Starlette(
            routes=[
                Route(HEALTH_PATH, self.health, methods=["GET"]),
                Route("/tasks", self.tasks, methods=["GET"]),
                Route("/stats", self.stats, methods=["GET"]),
                Route("/reward", self.reward, methods=["POST"]),
                Route("/openrlhf", self.openrlhf, methods=["POST"]),
            ],
            lifespan=self._lifespan,
        )
        self.app: ASGIApp = BearerAuth(app, token) if token else app

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await run_in_threadpool(self.engine.close)

    # ---------------------------------------------------------------- endpoints

    async def health(self, request: Request) -> Response:
        return AsciiJSON(
            {
                "status": "ok",
                "tasks": len(self.engine.tasks),
                "reward_version": REWARD_VERSION,
                "isolation": self.isolation,
            }
        )

    async def tasks(self, request: Request) -> Response:
        split = request.query_params.get("split")
        with_prompts = request.query_params.get("prompts") in ("1", "true")
        devices = await run_in_threadpool(self.engine.devices) if with_prompts else []
        listed = []
        for task in self.engine.tasks:
            if split and task.split != split:
                continue
            entry = task.describe()
            if with_prompts:
                entry["prompt"] = prompt_messages(task, devices[0] if devices else None)
            listed.append(entry)
        return AsciiJSON({"tasks": listed, "reward_version": REWARD_VERSION})

    async def stats(self, request: Request) -> Response:
        stats = self.engine.stats()
        devices = await run_in_threadpool(self.engine.devices)
        stats["devices"] = [to_dict(d) for d in devices]
        stats["clients_in_flight"] = sum(self.clients.values())
        stats["inflight_bytes"] = self.inflight_bytes
        return AsciiJSON(stats)

    async def reward(self, request: Request) -> Response:
        parsed = await self._admit(request)
        if isinstance(parsed, Response):
            return parsed
        ticket, body = parsed
        try:
            request_id = _text(body.get("id", ""), "id", 200, empty=True)
            deadline = self._deadline(body.get("deadline_s"), "deadline_s")
            raw = body.get("items")
            if not isinstance(raw, list) or not 1 <= len(raw) <= self.limits.max_items:
                raise _Invalid("items", f"must be a list of 1-{self.limits.max_items} items")
            items = [self._item(i, x) for i, x in enumerate(raw)]
        except _Invalid as exc:
            self._leave(ticket)
            return AsciiJSON({"error": str(exc), "field": exc.field}, status_code=422)
        return await self._answer(ticket, request_id, items, deadline, _results)

    async def openrlhf(self, request: Request) -> Response:
        """OpenRLHF's remote reward: ``labels`` name the tasks; a query that starts with its prompt
        is scored on the rest (the response), otherwise whole."""
        parsed = await self._admit(request)
        if isinstance(parsed, Response):
            return parsed
        ticket, body = parsed
        try:
            queries, labels = body.get("query"), body.get("labels")
            prompts = body.get("prompts") or [""] * (len(queries) if isinstance(queries, list) else 0)
            if not isinstance(queries, list) or not 1 <= len(queries) <= self.limits.max_items:
                raise _Invalid("query", f"must be a list of 1-{self.limits.max_items} texts")
            for name, values in (("labels", labels), ("prompts", prompts)):
                if not isinstance(values, list) or len(values) != len(queries):
                    raise _Invalid(name, f"must be a list as long as query ({len(queries)})")
            assert isinstance(labels, list)
            items = []
            for i, (q, p, label) in enumerate(zip(queries, prompts, labels, strict=True)):
                q = _text(q, f"query[{i}]", self.limits.max_completion_bytes)
                p = _text(p, f"prompts[{i}]", self.limits.max_completion_bytes, empty=True)
                items.append(self._item(i, {"key": str(i), "task": label, "completion": q.removeprefix(p)}))
        except _Invalid as exc:
            self._leave(ticket)
            return AsciiJSON({"error": str(exc), "field": exc.field}, status_code=422)
        return await self._answer(ticket, "", items, self.limits.max_deadline_s, self._openrlhf_body)

    # ---------------------------------------------------------------- helpers

    async def _admit(self, request: Request) -> tuple[_Ticket, dict[str, Any]] | Response:
        """The admitted request's ticket and its JSON object body, or the refusal: 429 past the
        requests in flight per token or in all, 503 past the bodies held in all (both with
        ``Retry-After``), 413, 400, 422."""
        key = requester(request)
        limits = self.limits
        if self.clients.get(key, 0) >= limits.max_per_client:
            return error_response(
                429,
                f"{limits.max_per_client} reward requests with this token are already in flight",
                headers={"Retry-After": "1"},
            )
        if sum(self.clients.values()) >= limits.max_in_flight:
            return error_response(
                429, f"{limits.max_in_flight} reward requests are in flight", headers={"Retry-After": "1"}
            )
        declared = request.headers.get("content-length", "")
        size = (
            int(declared)
            if declared.isdigit() and int(declared) <= limits.max_body_bytes
            else limits.max_body_bytes
        )
        if self.inflight_bytes and self.inflight_bytes + size > limits.max_inflight_bytes:
            return error_response(
                503,
                f"this service holds {self.inflight_bytes >> 20} MiB of requests already; retry",
                headers={"Retry-After": "1"},
            )
        ticket = _Ticket(key, size, time.monotonic())
        self.clients[key] = self.clients.get(key, 0) + 1
        self.inflight_bytes += size
        raw = await read_body(request, limits.max_body_bytes)
        if isinstance(raw, Response):
            self._leave(ticket)
            return raw
        ticket.arrived = time.monotonic()  # deadlines count from here
        try:  # off the event loop: a 32 MiB body takes a while to parse
            body = await run_in_threadpool(json.loads, raw)
        except (ValueError, RecursionError) as exc:
            self._leave(ticket)
            return error_response(400, f"body is not JSON: {str(exc)[:200]}")
        del raw
        if not isinstance(body, dict):
            self._leave(ticket)
            return AsciiJSON({"error": "body: must be a JSON object", "field": "body"}, status_code=422)
        if _depth(body) > limits.max_json_depth:  # what later walks of it (repr, dumps) would recurse on
            self._leave(ticket)
            return AsciiJSON(
                {"error": f"body: nested deeper than {limits.max_json_depth} levels", "field": "body"},
                status_code=422,
            )
        return ticket, body

    def _leave(self, ticket: _Ticket) -> None:
        self.inflight_bytes -= ticket.size
        self.clients[ticket.key] -= 1
        if not self.clients[ticket.key]:
            del self.clients[ticket.key]

    def _item(self, i: int, raw: Any) -> Item:
        where = f"items[{i}]"
        if not isinstance(raw, dict):
            raise _Invalid(where, "must be an object with key, task and completion")
        key = _text(raw.get("key", str(i)), f"{where}.key", 200, empty=True)
        ref = _text(raw.get("task"), f"{where}.task", 200)
        try:
            self.engine.tasks.resolve(ref)
        except TaskError as exc:
            raise _Invalid(f"{where}.task", str(exc)) from None
        completion = raw.get("completion")
        cap = self.limits.max_completion_bytes
        if isinstance(completion, list):
            if not all(isinstance(m, dict) for m in completion):
                raise _Invalid(f"{where}.completion", "a list of chat messages must hold objects")
            size = len(json.dumps(completion).encode())
        elif isinstance(completion, str):
            size = len(completion.encode("utf-8", "surrogatepass"))
        else:
            raise _Invalid(f"{where}.completion", "must be a text or a list of chat messages")
        if size > cap:
            raise _Invalid(f"{where}.completion", f"{size} bytes, more than this service's {cap}")
        deadline = raw.get("deadline_s")
        return Item(
            key,
            ref,
            completion,
            None if deadline is None else self._deadline(deadline, f"{where}.deadline_s"),
        )

    def _deadline(self, value: Any, field: str) -> float:
        cap = self.limits.max_deadline_s
        if value is None:
            return cap
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= cap:
            raise _Invalid(field, f"must be a number of seconds in (0, {cap:g}]")
        return float(value)

    async def _answer(
        self, ticket: _Ticket, request_id: str, items: list[Item], deadline: float, render: Any
    ) -> Response:
        try:
            digest = hashlib.sha256(repr((items, deadline)).encode()).hexdigest() if request_id else ""
            if request_id:
                done = self.done.get(request_id)
                if done is not None and done[0] == digest:
                    return AsciiJSON(render(request_id, done[1]))
                running = self.running.get(request_id)
                if running is not None and running[0] != digest:
                    return error_response(
                        409, f"request id {request_id!r} is in use by a different running request"
                    )
                if running is not None:
                    return AsciiJSON(render(request_id, await asyncio.shield(running[1])))
            left = max(0.0, deadline - (time.monotonic() - ticket.arrived))  # from when the body arrived
            future = asyncio.ensure_future(run_in_threadpool(self.engine.score, items, left))
            if request_id:
                self.running[request_id] = (digest, future)
            try:
                results = await asyncio.shield(future)
            except ExecutorError as exc:
                return error_response(503, str(exc))
            finally:
                if request_id:
                    self.running.pop(request_id, None)
            if request_id:
                self.done[request_id] = (digest, results)
                kept = sum(len(r) for _, r in self.done.values())
                while len(self.done) > self.limits.cached_responses or kept > self.limits.cached_results:
                    kept -= len(self.done.popitem(last=False)[1][1])
            return AsciiJSON(render(request_id, results))
        finally:
            self._leave(ticket)

    def _openrlhf_body(self, request_id: str, results: list[Scored]) -> dict[str, Any]:
        missing = self.limits.missing_reward
        rewards = [missing if r.reward is None else r.reward for r in results]
        return {
            "rewards": rewards,
            "scores": rewards,
            "extra_logs": {
                "milestone": [r.milestone.level if r.milestone else 0.0 for r in results],
                "speedup_low": [r.speedup_low for r in results],
                "hack": [float(r.reward == HACK) for r in results],
                "failed": [float(r.reward == FAILED) for r in results],
                "scored": [float(r.reward is not None) for r in results],
            },
        }


def _results(request_id: str, results: list[Scored]) -> dict[str, Any]:
    return to_dict(RewardResponse(request_id, REWARD_VERSION, tuple(results)))


def _depth(value: Any) -> int:
    """How deeply ``value`` (parsed JSON) nests lists and objects, found without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def _text(value: Any, field: str, cap: int, empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not empty) or len(value) > cap:
        raise _Invalid(field, f"must be a text of {'0' if empty else '1'}-{cap} characters")
    if field.endswith((".key", ".task", "id")) and not value.isprintable():
        raise _Invalid(field, "must be printable")
    return value
