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
(413), the items and completion sizes and the deadlines (422 naming the field), requests in flight
per client address (429), a task the service does not have (422).

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
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from agent.trajectory import FAILED, HACK, REWARD_VERSION
from base.asgi import BearerAuth, error_response, read_body
from base.http import HEALTH_PATH
from learning.completion import prompt_messages
from learning.engine import Item, RewardEngine, Scored
from learning.tasks import TaskError
from sandbox.contract import to_dict
from sandbox.executor import ExecutorError


@dataclass(frozen=True)
class RewardLimits:
    max_body_bytes: int = 32 << 20
    max_items: int = 1024  # per request
    max_completion_bytes: int = 256 << 10  # per item (UTF-8)
    max_per_client: int = 16  # requests in flight per client address
    max_deadline_s: float = 1800.0  # and the default deadline of a request
    cached_responses: int = 256  # finished answers kept for repeated request ids
    missing_reward: float = 0.0  # what /openrlhf reports for an item that got no reward


class _Invalid(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class RewardService:
    """The HTTP application over one :class:`RewardEngine`; ``app`` is the ASGI application."""

    def __init__(
        self, engine: RewardEngine, *, token: str | None, limits: RewardLimits = RewardLimits()
    ) -> None:
        self.engine = engine
        self.limits = limits
        self.clients: dict[str, int] = {}
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
        return JSONResponse(
            {"status": "ok", "tasks": len(self.engine.tasks), "reward_version": REWARD_VERSION}
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
        return JSONResponse({"tasks": listed, "reward_version": REWARD_VERSION})

    async def stats(self, request: Request) -> Response:
        stats = self.engine.stats()
        devices = await run_in_threadpool(self.engine.devices)
        stats["devices"] = [to_dict(d) for d in devices]
        stats["clients_in_flight"] = sum(self.clients.values())
        return JSONResponse(stats)

    async def reward(self, request: Request) -> Response:
        parsed = await self._admit(request)
        if isinstance(parsed, Response):
            return parsed
        client, body = parsed
        try:
            request_id = _text(body.get("id", ""), "id", 200, empty=True)
            deadline = self._deadline(body.get("deadline_s"), "deadline_s")
            raw = body.get("items")
            if not isinstance(raw, list) or not 1 <= len(raw) <= self.limits.max_items:
                raise _Invalid("items", f"must be a list of 1-{self.limits.max_items} items")
            items = [self._item(i, x) for i, x in enumerate(raw)]
        except _Invalid as exc:
            self._leave(client)
            return JSONResponse({"error": str(exc), "field": exc.field}, status_code=422)
        return await self._answer(client, request_id, items, deadline, _results)

    async def openrlhf(self, request: Request) -> Response:
        """OpenRLHF's remote reward: ``labels`` name the tasks; a query that starts with its prompt
        is scored on the rest (the response), otherwise whole."""
        parsed = await self._admit(request)
        if isinstance(parsed, Response):
            return parsed
        client, body = parsed
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
            self._leave(client)
            return JSONResponse({"error": str(exc), "field": exc.field}, status_code=422)
        return await self._answer(client, "", items, self.limits.max_deadline_s, self._openrlhf_body)

    # ---------------------------------------------------------------- helpers

    async def _admit(self, request: Request) -> tuple[str, dict[str, Any]] | Response:
        """The client and the JSON object body, or the refusal (429, 413, 400)."""
        client = request.client.host if request.client else "unknown"
        if self.clients.get(client, 0) >= self.limits.max_per_client:
            return error_response(
                429,
                f"{self.limits.max_per_client} reward requests from {client} are already in flight",
                headers={"Retry-After": "1"},
            )
        self.clients[client] = self.clients.get(client, 0) + 1
        raw = await read_body(request, self.limits.max_body_bytes)
        if isinstance(raw, Response):
            self._leave(client)
            return raw
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            self._leave(client)
            return error_response(400, f"body is not JSON: {str(exc)[:200]}")
        if not isinstance(body, dict):
            self._leave(client)
            return JSONResponse({"error": "body: must be a JSON object", "field": "body"}, status_code=422)
        return client, body

    def _leave(self, client: str) -> None:
        self.clients[client] -= 1
        if not self.clients[client]:
            del self.clients[client]

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
        self, client: str, request_id: str, items: list[Item], deadline: float, render: Any
    ) -> Response:
        try:
            digest = hashlib.sha256(repr((items, deadline)).encode()).hexdigest()
            if request_id:
                done = self.done.get(request_id)
                if done is not None and done[0] == digest:
                    return JSONResponse(render(request_id, done[1]))
                running = self.running.get(request_id)
                if running is not None and running[0] != digest:
                    return error_response(
                        409, f"request id {request_id!r} is in use by a different running request"
                    )
                if running is not None:
                    return JSONResponse(render(request_id, await asyncio.shield(running[1])))
            future = asyncio.ensure_future(run_in_threadpool(self.engine.score, items, deadline))
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
                while len(self.done) > self.limits.cached_responses:
                    self.done.popitem(last=False)
            return JSONResponse(render(request_id, results))
        finally:
            self._leave(client)

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
    return {"id": request_id, "reward_version": REWARD_VERSION, "results": [r.to_dict() for r in results]}


def _text(value: Any, field: str, cap: int, empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not empty) or len(value) > cap:
        raise _Invalid(field, f"must be a text of {'0' if empty else '1'}-{cap} characters")
    if field.endswith((".key", ".task", "id")) and not value.isprintable():
        raise _Invalid(field, "must be printable")
    return value
