"""The ``cuda-agent worker`` HTTP service: any :class:`Executor` served to remote clients.

One lane per GPU: each lane has its own job queue and a thread that feeds its executor one request
at a time; a new request goes to the lane with the least work.  Evaluations stream NDJSON events
(see :mod:`sandbox.remote` for the protocol).  A request id is idempotent: the same request posted
again attaches to the running job or gets the cached result; a finished id posted with another
request runs that request (callers make ids unique; a running id is never shared).  A job nobody watches any more (every client
disconnected and none came back within ``disconnect_grace_s``) is cancelled, as is one named by
``POST /cancel``.

Security: a bearer token (compared with :func:`hmac.compare_digest`) on every endpoint but
``/health``; :func:`base.http.check_listen_policy` refuses a non-loopback address without one.  Only JSON
``EvalRequest`` bodies are accepted (CUDA source and numbers: nothing that runs on the host), no
larger than ``max_body_bytes`` (413), whose kernels pass :func:`sandbox.boundary.check_kernel`
(allowed NVRTC options, plain filenames: 422 naming what is refused); at most ``max_per_client``
evaluations per token and ``max_in_flight`` in all at once (429).  A request id names a job only
for the requester that sent it (its token): only they attach to it or cancel it.  ``POST /program``
(a token holder's project built and run here, :mod:`sandbox.program_wire`) answers 403 unless the
worker was started with ``--allow-programs``; one program runs at a time (429), stopped when
its requester cancels it (``POST /cancel`` with its id) or its client disconnects.

Needs the ``worker`` extra (Starlette, uvicorn).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
import queue
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from base.asgi import AsciiJSON, BearerAuth, error_response, read_body, requester
from base.http import HEALTH_PATH, ConnectionLimits, QuietLog
from sandbox.boundary import check_kernel
from sandbox.capture import CaptureError
from sandbox.contract import (
    ContractError,
    EvalRequest,
    Progress,
    RequestError,
    RequestLimits,
    Status,
    from_dict,
    from_json,
    to_dict,
    to_json,
    validate_request,
)
from sandbox.executor import Executor, ExecutorError
from sandbox.http_wire import (
    CANCEL_PATH,
    DEVICE_PATH,
    EVALUATE_PATH,
    HEARTBEAT_S,
    NDJSON,
    CancelReply,
    CancelRequest,
    ErrorEvent,
    FinalEvent,
    HeartbeatEvent,
    ProgressEvent,
    QueuedEvent,
    ResultEvent,
    StartedEvent,
    StreamEvent,
    encode_event,
)
from sandbox.program_wire import (
    PROGRAM_PATH,
    PROGRAMS_OFF,
    MissingFiles,
    ProgramReply,
    ProgramRequest,
    TooLarge,
    check_request,
    decode,
    encode,
)
from sandbox.programs import ProgramHost

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits(ConnectionLimits):
    """What the worker's clients may ask of it: its connections' limits and the evaluations'."""

    max_body_bytes: int = 8 << 20
    max_per_client: int = 8  # evaluations in flight per token (requester), not per address
    max_in_flight: int = 64  # evaluations in flight in all
    heartbeat_s: float = HEARTBEAT_S
    disconnect_grace_s: float = 10.0  # an unwatched job is cancelled after this
    cached_results: int = 1024  # finished results kept for repeated request ids
    request: RequestLimits = field(default_factory=RequestLimits)  # what one evaluation may ask for


# --------------------------------------------------------------------------- jobs and lanes


class _Job:
    """One evaluation: its cancel event, its subscribers (one queue per open stream), and the latest
    state to replay to a client that attaches late.  Mutated only on the event loop; the lane thread
    reaches it through :meth:`post`."""

    def __init__(
        self, request: EvalRequest, digest: str, loop: asyncio.AbstractEventLoop, owner: str
    ) -> None:
        self.request = request
        self.digest = digest
        self.owner = owner  # who sent it (base.asgi.requester): only they can attach to it or cancel it
        self.loop = loop
        self.cancel = threading.Event()
        self.subscribers: set[asyncio.Queue[StreamEvent]] = set()
        self.latest: dict[str, StreamEvent] = {}  # by event kind: queued, started, progress
        self.final: FinalEvent | None = None
        self.abandoned = False

    def post(self, event: StreamEvent, then: Callable[[], None] | None = None) -> None:
        """From any thread: publish ``event`` on the loop, then run ``then`` there."""

        def publish() -> None:
            self.publish(event)
            if then is not None:
                then()

        self.loop.call_soon_threadsafe(publish)

    def publish(self, event: StreamEvent) -> None:
        if isinstance(event, ResultEvent | ErrorEvent):
            self.final = event
        else:
            if isinstance(event, StartedEvent):
                self.latest.pop(QueuedEvent.kind, None)
            self.latest[event.kind] = event
        for subscriber in self.subscribers:
            subscriber.put_nowait(event)

    def snapshot(self) -> list[StreamEvent]:
        return [self.final] if self.final is not None else list(self.latest.values())


class _Lane:
    """One GPU: a queue of jobs and a thread that runs them on the GPU's executor in turn."""

    def __init__(self, index: int, executor: Executor, finished: Callable[[_Job, _Lane], None]) -> None:
        self.index = index
        self.executor = executor
        self.load = 0  # queued + running; touched only on the event loop
        self._finished = finished
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=f"gpu-lane-{index}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> None:
        self._jobs.put(None)
        self._thread.join(timeout)

    def submit(self, job: _Job) -> None:
        job.publish(QueuedEvent(self.index, self.load))
        self.load += 1
        self._jobs.put(job)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            self._evaluate(job)

    def _evaluate(self, job: _Job) -> None:
        job.post(StartedEvent(self.index))

        def progress(p: Progress) -> None:
            job.post(ProgressEvent(p))

        event: FinalEvent
        try:
            event = ResultEvent(self.executor.evaluate(job.request, progress=progress, cancel=job.cancel))
        except ExecutorError as exc:
            event = ErrorEvent(str(exc))
        except Exception as exc:
            log.exception("evaluation %s crashed the executor", job.request.id)
            event = ErrorEvent(f"internal error on the worker: {type(exc).__name__}: {exc}")
        job.post(event, then=functools.partial(self._finished, job, self))


# --------------------------------------------------------------------------- the service


class WorkerService:
    """The HTTP application over one executor per GPU; ``app`` is the ASGI application."""

    def __init__(
        self,
        executors: Sequence[Executor],
        *,
        token: str | None,
        limits: Limits = Limits(),
        simulated: bool = False,
        isolation: str = "none",
        programs: ProgramHost | None = None,
    ) -> None:
        """``isolation``: how compiles of requests are isolated from this host
        (:func:`sandbox.compile_pool.compile_isolation`), said in ``/health``; ``programs``: who
        builds and runs ``POST /program``'s projects (None: the endpoint answers 403)."""
        if not executors:
            raise ValueError("a worker needs at least one executor")
        self.limits = limits
        self.simulated = simulated  # the executors are simulated GPUs (said in /health and /device)
        self.isolation = isolation
        self.programs = programs
        self.quiet = QuietLog(limits.log_interval_s)  # disconnects, logged once per client per interval
        self.lanes = [_Lane(i, e, self._finished) for i, e in enumerate(executors)]
        # jobs by (requester, id): a request id names a job only for whoever sent it (requester)
        self.running: dict[tuple[str, str], _Job] = {}
        self.done: OrderedDict[tuple[str, str], tuple[str, ResultEvent]] = (
            OrderedDict()
        )  # -> (digest, result)
        self.clients: dict[str, int] = {}  # evaluations in flight by requester
        self.program_runs: dict[tuple[str, str], threading.Event] = {}  # (requester, id) -> cancel
        app = Starlette(
            routes=[
                Route(HEALTH_PATH, self.health, methods=["GET"]),
                Route(DEVICE_PATH, self.device, methods=["GET"]),
                Route(EVALUATE_PATH, self.evaluate, methods=["POST"]),
                Route(CANCEL_PATH, self.cancel, methods=["POST"]),
                Route(PROGRAM_PATH, self.program, methods=["POST"]),
            ],
            lifespan=self._lifespan,
        )
        self.app: ASGIApp = BearerAuth(app, token) if token else app

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        for lane in self.lanes:
            lane.start()
        try:
            yield
        finally:
            for job in self.running.values():
                job.cancel.set()
            for stop in self.program_runs.values():
                stop.set()
            for lane in self.lanes:
                await run_in_threadpool(lane.stop, 10.0)

    # ---------------------------------------------------------------- endpoints

    async def health(self, request: Request) -> Response:
        """``ok`` with the number of GPUs (simulated or not) and the compiles' isolation; 503
        ``no_gpu`` when there is none."""
        about = {"simulated": self.simulated, "isolation": self.isolation}
        try:
            count = await run_in_threadpool(lambda: len([lane.executor.device_info() for lane in self.lanes]))
        except ExecutorError as exc:
            return JSONResponse({"status": "no_gpu", "error": str(exc), **about}, status_code=503)
        return JSONResponse({"status": "ok", "gpus": count, **about})

    async def device(self, request: Request) -> Response:
        try:
            infos = await run_in_threadpool(
                lambda: [to_dict(lane.executor.device_info()) for lane in self.lanes]
            )
        except ExecutorError as exc:
            return error_response(503, str(exc))
        return JSONResponse({"devices": infos, "simulated": self.simulated})

    async def cancel(self, request: Request) -> Response:
        body = await read_body(
            request, 64 << 10, self.limits.body_timeout_s, self.limits.min_body_rate, self.quiet
        )
        if isinstance(body, Response):
            return body
        try:
            request_id = from_json(CancelRequest, body).id
        except ContractError:
            return error_response(400, 'expected {"id": "<request id>"}')
        key = (requester(request), request_id)  # only its requester can cancel a job
        job = self.running.get(key)
        stop = job.cancel if job is not None else self.program_runs.get(key)
        if stop is not None:
            stop.set()
            log.info("cancel requested for %s", request_id)
            return JSONResponse(to_dict(CancelReply(request_id, cancelled=True)))
        if key in self.done:
            return JSONResponse(to_dict(CancelReply(request_id, cancelled=False, finished=True)))
        return error_response(404, f"no evaluation or program with id {request_id!r}")

    def _over_caps(self, client: str) -> Response | None:
        """The 429 for a client at its cap or a worker at its total, else None."""
        if self.clients.get(client, 0) >= self.limits.max_per_client:
            return error_response(
                429,
                f"{self.limits.max_per_client} evaluations with this token are already in flight",
                headers={"Retry-After": "1"},
            )
        if sum(self.clients.values()) >= self.limits.max_in_flight:
            return error_response(
                429, f"{self.limits.max_in_flight} evaluations are in flight", headers={"Retry-After": "1"}
            )
        return None

    async def evaluate(self, request: Request) -> Response:
        client = requester(request)
        if refused := self._over_caps(client):  # before reading a body the caps refuse anyway
            return refused
        body = await read_body(
            request,
            self.limits.max_body_bytes,
            self.limits.body_timeout_s,
            self.limits.min_body_rate,
            self.quiet,
        )
        if isinstance(body, Response):
            return body
        parsed = _parse_request(body, self.limits.request)
        if isinstance(parsed, Response):
            return parsed
        digest = hashlib.sha256(to_json(parsed).encode()).hexdigest()  # the request, not its spelling

        key = (client, parsed.id)
        cached = self.done.get(key)
        job = self.running.get(key)
        if (
            job and job.digest != digest
        ):  # two live evaluations under one id: cancel could not tell them apart
            return error_response(409, f"request id {parsed.id!r} is in use by a different running request")
        if cached and cached[0] == digest:  # a replay: the same request again
            return _EventStream(_replay([cached[1]]), on_close=lambda: None)
        # again, with no await between this check and the count below: requests that arrived
        # together all passed the first check while their bodies were read
        if job is None and (refused := self._over_caps(client)):
            return refused
        if job is None:
            job = self.running[key] = _Job(parsed, digest, asyncio.get_running_loop(), client)
            min(self.lanes, key=lambda lane: lane.load).submit(job)
        else:
            log.info("client reattached to %s", parsed.id)

        subscriber: asyncio.Queue[StreamEvent] = asyncio.Queue()
        snapshot = job.snapshot()  # taken together with subscribing: no event is lost or doubled
        job.subscribers.add(subscriber)
        self.clients[client] = self.clients.get(client, 0) + 1

        def on_close(job: _Job = job) -> None:
            self.clients[client] -= 1
            if not self.clients[client]:
                del self.clients[client]
            job.subscribers.discard(subscriber)
            if job.final is None and not job.subscribers:
                job.loop.call_later(self.limits.disconnect_grace_s, self._abandon_if_unwatched, job)

        return _EventStream(self._follow(snapshot, subscriber), on_close=on_close)

    async def program(self, request: Request) -> Response:
        """Build and run a token holder's project (:mod:`sandbox.program_wire`): 403 unless the
        worker allows programs, 429 while another one runs, 409 naming the files it lacks.  Its
        requester's ``POST /cancel`` naming its id, or the client leaving, stops it."""
        host = self.programs
        if host is None:
            return error_response(403, PROGRAMS_OFF)
        if not host.busy.acquire(blocking=False):
            return error_response(
                429, "another program is running on this worker", headers={"Retry-After": "5"}
            )
        handed = False  # the lock goes with the run to its thread (a client that leaves does not free it)
        try:
            body = await read_body(
                request,
                host.limits.max_body_bytes,
                self.limits.body_timeout_s,
                self.limits.min_body_rate,
                self.quiet,
            )
            if isinstance(body, Response):
                return body
            try:
                parsed = decode(ProgramRequest, body)
                check_request(parsed, host.limits)
            except TooLarge as exc:
                return AsciiJSON({"error": str(exc), "field": exc.field}, status_code=413)
            except RequestError as exc:
                return AsciiJSON({"error": str(exc), "field": exc.field}, status_code=422)
            except ContractError as exc:
                return error_response(422, str(exc))
            if missing := host.missing(parsed):
                lacks = MissingFiles(f"the worker lacks {len(missing)} file(s): send their bodies", missing)
                return Response(encode(lacks), status_code=409, media_type="application/json")
            key = (requester(request), parsed.id)  # one program at a time: never one running
            stop = self.program_runs[key] = threading.Event()
            gone = asyncio.create_task(_set_when_disconnected(request, stop))
            handed = True
            try:
                reply = await run_in_threadpool(_serve_then_release, host, parsed, stop)
            except TooLarge as exc:
                return AsciiJSON({"error": str(exc), "field": exc.field}, status_code=413)
            except CaptureError as exc:
                return error_response(422, f"the program could not run: {exc}")
            finally:
                gone.cancel()
                del self.program_runs[key]
            if reply.cancelled:
                log.info("program %s cancelled", parsed.id)
            return Response(encode(reply), media_type="application/json")
        finally:
            if not handed:
                host.busy.release()

    # ---------------------------------------------------------------- bookkeeping (event loop)

    async def _follow(
        self, snapshot: list[StreamEvent], subscriber: asyncio.Queue[StreamEvent]
    ) -> AsyncIterator[bytes]:
        for event in snapshot:
            yield encode_event(event)
            if isinstance(event, ResultEvent | ErrorEvent):
                return
        while True:
            try:
                event = await asyncio.wait_for(subscriber.get(), self.limits.heartbeat_s)
            except asyncio.TimeoutError:  # not the builtin TimeoutError before Python 3.11
                event = HeartbeatEvent()
            yield encode_event(event)
            if isinstance(event, ResultEvent | ErrorEvent):
                return

    def _abandon_if_unwatched(self, job: _Job) -> None:
        if job.final is None and not job.subscribers:
            log.info("no client is waiting for %s any more; cancelling it", job.request.id)
            job.abandoned = True
            job.cancel.set()

    def _finished(self, job: _Job, lane: _Lane) -> None:
        lane.load -= 1
        self.running.pop((job.owner, job.request.id), None)
        final = job.final
        _log_outcome(job.request, final, job.abandoned)
        # Results of abandoned jobs are not kept: a client that comes back later gets a fresh run.
        if isinstance(final, ResultEvent) and not job.abandoned:
            self.done[(job.owner, job.request.id)] = (job.digest, final)
            while len(self.done) > self.limits.cached_results:
                self.done.popitem(last=False)


def _serve_then_release(host: ProgramHost, request: ProgramRequest, cancel: threading.Event) -> ProgramReply:
    """Run ``request`` on ``host`` (a thread), then let the next program in."""
    try:
        return host.serve(request, cancel)
    finally:
        host.busy.release()


async def _set_when_disconnected(request: Request, event: threading.Event) -> None:
    """Set ``event`` when the client of ``request`` (its body read) closes the connection."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
    log.info("the client of a program left; stopping it")
    event.set()


def _log_outcome(request: EvalRequest, final: FinalEvent | None, abandoned: bool) -> None:
    """One line per evaluation: done (the baseline's verdict, candidates ok), cancelled or failed."""
    what = f"evaluation {request.id} ({len(request.candidates)} candidates)"
    if isinstance(final, ResultEvent):
        result = final.result
        ok = sum(1 for c in result.candidates if c.status == Status.OK)
        cancelled = " after the client left" if abandoned else ""
        log.info("%s: done%s, baseline %s, %d ok", what, cancelled, result.baseline.status.value, ok)
    else:
        log.warning("%s: failed: %s", what, final.message if final else "no result")


# --------------------------------------------------------------------------- HTTP helpers


class _EventStream(StreamingResponse):
    """An NDJSON event stream that runs ``on_close`` however it ends (finished, client gone,
    server shutting down)."""

    def __init__(self, events: AsyncIterator[bytes], on_close: Callable[[], None]) -> None:
        super().__init__(events, media_type=NDJSON, headers={"Cache-Control": "no-store"})
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()


async def _replay(events: list[StreamEvent]) -> AsyncIterator[bytes]:
    for event in events:
        yield encode_event(event)


class _HugeInt:
    """Stands in for an integer literal too long to convert (Python refuses over 4,300 digits)."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _int_or_huge(text: str) -> int | _HugeInt:
    return int(text) if len(text) <= 4000 else _HugeInt(len(text))


def _undecodable(data: Any) -> tuple[str, str] | None:
    """``(field, why)`` for the first value of decoded JSON that no field can take: a string (or
    key) with a lone surrogate, an integer of thousands of digits; None when there is none."""
    pending: list[tuple[str, Any]] = [("", data)]
    while pending:
        where, value = pending.pop()
        if isinstance(value, _HugeInt):
            return where, f"an integer of {value.digits} digits"
        if isinstance(value, str) and not _encodable(value):
            return where, "a string with a lone surrogate (not Unicode text)"
        if isinstance(value, dict):
            for key, item in value.items():
                if not _encodable(key):
                    return where or "body", "a key with a lone surrogate (not Unicode text)"
                pending.append((f"{where}.{key}" if where else key, item))
        elif isinstance(value, list):
            pending += [(f"{where}[{i}]", item) for i, item in enumerate(value)]
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _parse_request(body: bytes, limits: RequestLimits) -> EvalRequest | Response:
    try:
        data = json.loads(body, parse_int=_int_or_huge)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return error_response(400, f"body is not JSON: {exc}")
    except RecursionError:
        return error_response(400, "body is not JSON: nested too deeply")
    if bad := _undecodable(data):
        where, what = bad
        return AsciiJSON({"error": f"{where}: {what}", "field": where}, status_code=422)
    try:
        request = from_dict(EvalRequest, data)
        validate_request(request, limits)
    except RequestError as exc:
        return AsciiJSON({"error": str(exc), "field": exc.field}, status_code=422)
    except ContractError as exc:
        return error_response(422, str(exc))
    for kernel in [request.baseline, *(c.kernel for c in request.candidates)]:
        if why := check_kernel(kernel):
            return error_response(422, why)
    return request
