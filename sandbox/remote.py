"""Executors that evaluate somewhere else: a ``cuda-agent worker`` over HTTP, or a Ray cluster.

Both speak only contract types (:mod:`sandbox.contract`) as JSON, and both are used exactly like the
local executor: ``evaluate(request, progress=..., cancel=...)`` returns an :class:`EvalResult`.

The worker protocol (served by :mod:`sandbox.service`; its messages in :mod:`sandbox.http_wire`):

- ``GET /health`` (no token): ``{"status": "ok"}``.
- ``GET /device``: ``{"devices": [DeviceInfo, ...]}``, one per GPU the worker serves.
- ``POST /evaluate`` with an ``EvalRequest`` as JSON: a stream of NDJSON events, one per line:
  ``queued`` (``gpu``, ``ahead``), ``started`` (``gpu``), ``progress`` (``progress``: Progress),
  ``heartbeat`` (at least every few seconds, so a silent connection is a dead one), and finally
  ``result`` (``result``: EvalResult) or ``error`` (``message``).  The request's ``id`` makes it
  idempotent: posting the same id again attaches to the running evaluation or returns its cached
  result, so a client that lost its connection simply posts again.
- ``POST /cancel`` with a :class:`~sandbox.http_wire.CancelRequest` (``{"id": request_id}``): sets
  the evaluation's cancel event (the id travels in the body, so any id works, unescaped).

Every endpoint but ``/health`` needs ``Authorization: Bearer <token>``.  Errors are JSON
``{"error": message}`` with status 400 (not JSON), 401 (token), 409 (id in use by another running
request), 413 (too large), 422 (not a valid EvalRequest, or a field out of the worker's bounds:
``field`` names it), 429 (too many evaluations from this
client; ``Retry-After``), 503 (no GPU).

Ray is imported only inside :class:`RayExecutor` and its actors (extra ``cluster``).
"""

from __future__ import annotations

import logging
import os
import queue
import secrets
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import httpx

from base.errors import install_hint
from sandbox.contract import (
    CandidateResult,
    ContractError,
    DeviceInfo,
    EvalRequest,
    EvalResult,
    Progress,
    RequestLimits,
    Status,
    from_dict,
    from_json,
    to_dict,
    to_json,
)
from sandbox.executor import (
    AuthError,
    Executor,
    ExecutorError,
    ProgressFn,
    WorkerUnavailable,
)
from sandbox.http_wire import (
    CANCEL_PATH,
    DEVICE_PATH,
    EVALUATE_PATH,
    HEARTBEAT_S,
    NDJSON,
    CancelRequest,
    ErrorEvent,
    HeartbeatEvent,
    ProgressEvent,
    ResultEvent,
    StartedEvent,
    decode_event,
)
from sandbox.scheduler import GpuScheduler, Lane

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 2.0  # a worker that does not accept a connection this soon is reported unreachable

# Slack added to a request's own budgets before the client gives up on the worker.
_DEADLINE_SLACK_S = 30.0

EvalFn = Callable[[EvalRequest, ProgressFn, threading.Event], EvalResult]


def run_budget_s(request: EvalRequest) -> float:
    """The longest an evaluation may run once started: every kernel (baseline included) at its
    per-candidate timeout, plus slack for worker start-up and transfer."""
    return (1 + len(request.candidates)) * request.budget.timeout_s + _DEADLINE_SLACK_S


def cancelled_result(request: EvalRequest, message: str) -> EvalResult:
    """The result of a request that was cancelled before the worker could answer."""

    def cancelled(candidate_id: str) -> CandidateResult:
        return CandidateResult(candidate_id=candidate_id, status=Status.CANCELLED, message=message)

    return EvalResult(
        request_id=request.id,
        baseline=cancelled("baseline"),
        candidates=tuple(cancelled(c.id) for c in request.candidates),
    )


# --------------------------------------------------------------------------- HTTP worker client


class RemoteExecutor(Executor):
    """Evaluates on a ``cuda-agent worker`` over HTTP(S), authenticated with a bearer token.

    ``verify``: True (system CAs), False (no TLS check; only for tests) or the path of a CA bundle or
    self-signed certificate to trust.  ``reconnect_s``: how long the worker may stay unreachable
    (connection refused, dropped stream, 502-504) before :class:`WorkerUnavailable`; in that window
    the client re-posts the same request id, which the worker answers idempotently.
    ``queue_timeout_s``: how long a request may wait for a GPU (queued or refused with 429) before
    it starts; once started, the request's own budgets bound the wait (:func:`run_budget_s`).
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        verify: bool | str = True,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        reconnect_s: float = 30.0,
        queue_timeout_s: float = 600.0,
        cancel_grace_s: float = 10.0,
    ) -> None:
        self.url = url.rstrip("/")
        self._id_suffix = secrets.token_urlsafe(16)  # see evaluate: ids nobody else can guess
        self.reconnect_s = reconnect_s
        self.queue_timeout_s = queue_timeout_s
        self.cancel_grace_s = cancel_grace_s
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        tls: ssl.SSLContext | bool
        if isinstance(verify, str):
            try:
                tls = ssl.create_default_context(cafile=verify)
            except (OSError, ssl.SSLError) as exc:
                raise ExecutorError(
                    f"cannot load the certificate to trust for {self.url}: {verify}: {exc}"
                ) from exc
        else:
            tls = verify
        self._client = httpx.Client(
            base_url=self.url,
            headers=headers,
            verify=tls,
            # A stream is silent for at most HEARTBEAT_S; three missed heartbeats mean it is dead.
            timeout=httpx.Timeout(connect=connect_timeout_s, read=3 * HEARTBEAT_S, write=30.0, pool=None),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=32),
        )

    def close(self) -> None:
        self._client.close()

    # ---------------------------------------------------------------- Executor

    def device_info(self) -> DeviceInfo:
        """The first GPU the worker serves (see :meth:`devices` for all)."""
        return self.devices()[0]

    def devices(self) -> tuple[DeviceInfo, ...]:
        response = self._request("GET", DEVICE_PATH)
        try:
            devices = tuple(from_dict(DeviceInfo, d) for d in response.json()["devices"])
        except (ValueError, KeyError, TypeError) as exc:  # JSONDecodeError and ContractError are ValueErrors
            raise self._not_a_worker(f"GET {DEVICE_PATH}", exc) from exc
        if not devices:
            raise WorkerUnavailable(f"worker at {self.url} serves no GPU")
        return devices

    def evaluate(
        self,
        request: EvalRequest,
        *,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
    ) -> EvalResult:
        # On the wire the id is the caller's plus this client's 128 random bits: a worker shared
        # by several holders of one token knows a job by its id alone, so nobody can guess it to
        # cancel or watch someone else's evaluation (the same request from this client again is
        # still a replay).  The caller sees its own id throughout.
        wire = replace(request, id=f"{request.id[:170]}~{self._id_suffix}")
        shown = None if progress is None else _renamed_progress(progress, request.id)
        body = to_json(wire).encode()
        call = _Call(self, wire, body, shown, cancel or threading.Event())
        if cancel is not None:
            threading.Thread(target=call.watch_cancel, name=f"cancel-{request.id}", daemon=True).start()
        try:
            return replace(call.run(), request_id=request.id)
        finally:
            call.done.set()

    # ---------------------------------------------------------------- plumbing

    def _request(self, method: str, path: str) -> httpx.Response:
        """One short request, retried while the worker is unreachable (up to ``reconnect_s``)."""
        outage = _Outage(self)
        while True:
            try:
                response = self._client.request(method, path)
            except httpx.TransportError as exc:
                outage.wait_or_raise(exc)
                continue
            if _transient(response):
                outage.wait_or_raise(_describe_response(response))
                continue
            self._raise_for_status(response)
            return response

    def _raise_for_status(self, response: httpx.Response) -> None:
        """Turn a refused request into one clear exception; 200 passes."""
        code = response.status_code
        if code == 200:
            return
        reason = _describe_response(response)
        if code in (401, 403):
            raise AuthError(f"worker at {self.url} refused the token ({reason}); check the token file")
        if code == 503:
            raise WorkerUnavailable(f"worker at {self.url} cannot evaluate: {reason}")
        raise ExecutorError(f"worker at {self.url} refused the request: {reason}")

    def _not_a_worker(self, what: str, cause: BaseException | str) -> ExecutorError:
        detail = cause if isinstance(cause, str) else f"{type(cause).__name__}: {cause}"
        return ExecutorError(
            f"{self.url} does not answer like a cuda-agent worker ({what}: {str(detail)[:200]}); "
            "check CUDA_AGENT_WORKER_URL"
        )

    def _cancel_on_worker(self, request_id: str) -> None:
        try:
            self._client.post(CANCEL_PATH, json=to_dict(CancelRequest(request_id)), timeout=5.0)
        except httpx.HTTPError as exc:
            log.warning("could not cancel %s on %s: %s", request_id, self.url, exc)


def _transient(response: httpx.Response) -> bool:
    """A gateway's 502-504 (tunnel or proxy up, worker behind it restarting) or the worker's 503
    with ``Retry-After`` (too many connections open): worth retrying.  The worker's own 503
    without it (it has no usable GPU) carries a JSON error and is final."""
    if response.status_code not in (502, 503, 504):
        return False
    if response.status_code == 503 and "retry-after" in response.headers:
        return True
    response.read()
    try:
        body = response.json()
    except ValueError:
        return True
    return not (isinstance(body, dict) and "error" in body)


class _Outage:
    """Tracks how long the worker has been unreachable; raises once ``reconnect_s`` is spent.
    Each failed attempt is reported as it happens (a warning for the first of an outage, then
    ``report``: the evaluation's progress), so the user hears within :data:`CONNECT_TIMEOUT_S`."""

    def __init__(self, executor: RemoteExecutor, report: Callable[[str], None] | None = None) -> None:
        self.executor = executor
        self.report = report
        self.since: float | None = None
        self.delay = 0.1

    def reset(self) -> None:
        self.since, self.delay = None, 0.1

    def wait_or_raise(self, cause: BaseException | str) -> None:
        url = self.executor.url
        if isinstance(cause, BaseException) and _tls_failure(cause):
            raise WorkerUnavailable(
                f"TLS check of {url} failed ({_tls_failure(cause)}); pass the worker's certificate as verify="
            )
        now = time.monotonic()
        self.since = self.since if self.since is not None else now
        reason = cause if isinstance(cause, str) else f"{type(cause).__name__}: {cause}"
        if now - self.since >= self.executor.reconnect_s:
            raise WorkerUnavailable(
                f"cannot reach the worker at {url} for {self.executor.reconnect_s:.0f} s ({reason}); "
                "is `cuda-agent worker` running there and the tunnel, if any, up?"
            )
        left = self.executor.reconnect_s - (now - self.since)
        message = f"cannot reach the worker at {url} ({reason}); retrying for up to {left:.0f} s"
        log.log(logging.WARNING if now == self.since else logging.INFO, "%s", message)
        if self.report is not None:
            self.report(message)
        time.sleep(self.delay)
        self.delay = min(self.delay * 2, 2.0)


def _renamed_progress(progress: ProgressFn, request_id: str) -> ProgressFn:
    return lambda p: progress(replace(p, request_id=request_id))


class _Call:
    """One evaluation on the worker: post, follow the event stream, re-post after a drop."""

    def __init__(
        self,
        executor: RemoteExecutor,
        request: EvalRequest,
        body: bytes,
        progress: ProgressFn | None,
        cancel: threading.Event,
    ) -> None:
        self.executor = executor
        self.request = request
        self.body = body
        self.progress = progress
        self.cancel = cancel
        self.done = threading.Event()
        self.submitted = time.monotonic()
        self.started: float | None = None
        self.cancelled_at: float | None = None
        self.outage = _Outage(executor, self._report)  # how long the worker has been unreachable

    def _report(self, message: str) -> None:
        if self.progress is not None:
            self.progress(Progress(self.request.id, 0, len(self.request.candidates), message))

    def watch_cancel(self) -> None:
        """Forward the caller's cancel to the worker the moment it is set (runs in its own thread)."""
        while not self.done.is_set():
            if self.cancel.wait(0.05):
                if not self.done.is_set():
                    self.executor._cancel_on_worker(self.request.id)
                return

    def run(self) -> EvalResult:
        outage = self.outage
        while True:
            if self.cancel.is_set() and self.started is None:
                return cancelled_result(self.request, "cancelled before the worker started it")
            try:
                with self.executor._client.stream(
                    "POST", EVALUATE_PATH, content=self.body, headers={"Content-Type": "application/json"}
                ) as response:
                    if response.status_code == 429:
                        self._wait_for_slot(response)
                        continue
                    if _transient(response):
                        outage.wait_or_raise(_describe_response(response))
                        continue
                    self.executor._raise_for_status(response)
                    kind = response.headers.get("content-type", "").split(";")[0].strip()
                    if kind != NDJSON:
                        raise self.executor._not_a_worker(
                            f"POST {EVALUATE_PATH}", f"a {kind or 'untyped'} page"
                        )
                    result = self._follow(response.iter_lines())
                    if result is not None:
                        return result
                    cause: BaseException | str = "the worker closed the stream before the result"
            except httpx.TransportError as exc:
                cause = exc
            if self.cancel.is_set():
                return cancelled_result(self.request, f"cancelled; the worker went away ({cause})")
            outage.wait_or_raise(cause)

    def _follow(self, lines: Iterator[str]) -> EvalResult | None:
        """Consume events until the result; None if the stream ended without one."""
        for line in lines:
            if not line:
                continue
            try:
                event = decode_event(line)
            except ContractError as exc:  # not JSON, not an event, not the contract
                raise self.executor._not_a_worker(f"event {line[:80]!r}", exc) from exc
            if isinstance(event, ResultEvent):
                return self._checked(event.result)
            if isinstance(event, ErrorEvent):
                raise WorkerUnavailable(f"worker at {self.executor.url} failed: {event.message[:2000]}")
            if isinstance(event, ProgressEvent) and self.progress is not None:
                self.progress(event.progress)
            if isinstance(event, StartedEvent) and self.started is None:
                self.started = time.monotonic()
            elif isinstance(event, HeartbeatEvent):
                # live, never replayed: a stream that only replays and drops is an outage
                self.outage.reset()
            if self._cancel_unconfirmed():
                return cancelled_result(self.request, "cancelled; the worker did not confirm in time")
            self._check_deadline()
        return None

    def _checked(self, result: EvalResult) -> EvalResult:
        """``result`` if it answers this request (its id, its candidates in order); else an error."""
        wanted = [c.id for c in self.request.candidates]
        got = [c.candidate_id for c in result.candidates]
        if result.request_id != self.request.id or got != wanted:
            raise self.executor._not_a_worker(
                "result",
                f"it answered request {result.request_id[:80]!r} with candidates {got[:8]}"
                f" for request {self.request.id[:80]!r} with candidates {wanted[:8]}",
            )
        return result

    def _cancel_unconfirmed(self) -> bool:
        """True once the caller cancelled and the worker has not answered within ``cancel_grace_s``."""
        if not self.cancel.is_set():
            return False
        now = time.monotonic()
        self.cancelled_at = self.cancelled_at or now
        return now - self.cancelled_at > self.executor.cancel_grace_s

    def _check_deadline(self) -> None:
        now = time.monotonic()
        if self.started is None:
            limit, since, what = self.executor.queue_timeout_s, self.submitted, "start"
        else:
            limit, since, what = run_budget_s(self.request), self.started, "finish"
        if now - since > limit:
            self.executor._cancel_on_worker(self.request.id)
            raise WorkerUnavailable(
                f"worker at {self.executor.url} did not {what} request {self.request.id} within {limit:.0f} s; "
                "cancelled it there"
            )

    def _wait_for_slot(self, response: httpx.Response) -> None:
        if time.monotonic() - self.submitted > self.executor.queue_timeout_s:
            raise WorkerUnavailable(
                f"worker at {self.executor.url} stayed busy for {self.executor.queue_timeout_s:.0f} s "
                f"({_describe_response(response)})"
            )
        try:
            delay = float(response.headers.get("Retry-After", "1"))
        except ValueError:
            delay = 1.0
        time.sleep(min(max(delay, 0.05), 5.0))


def _describe_response(response: httpx.Response) -> str:
    try:
        response.read()
        message = response.json().get("error", "")
    except (ValueError, AttributeError, httpx.HTTPError):
        message = ""
    return f"HTTP {response.status_code}" + (f": {message}" if message else "")


def _tls_failure(exc: BaseException) -> str:
    """The certificate problem behind a connection error, or '' if it is not one."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return seen.verify_message or str(seen)
        if "CERTIFICATE_VERIFY_FAILED" in str(seen):
            return "certificate verify failed"
        seen = seen.__cause__ or seen.__context__
    return ""


# --------------------------------------------------------------------------- Ray


def local_gpu_executor(gpu: int, limits: RequestLimits | None = None, handler: str = "") -> Executor:
    """The sandbox's local executor on GPU ``gpu`` of this machine (imports the GPU stack);
    ``handler`` (``module:factory``) replaces the GPU handler of its worker processes."""
    from sandbox.local import LocalExecutor
    from sandbox.wire import DEFAULT_HANDLER

    return LocalExecutor(devices=(gpu,), limits=limits, handler=handler or DEFAULT_HANDLER)


def _local_gpu() -> Executor:
    """The local executor of the GPU Ray gave this process (its device 0), made once."""
    key = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    with _LOCAL_LOCK:
        executor = _LOCAL.get(key)
        if executor is None:
            executor = _LOCAL[key] = local_gpu_executor(0)
    return executor


def _evaluate_on_local_gpu(request: EvalRequest, progress: ProgressFn, cancel: threading.Event) -> EvalResult:
    """The default evaluation of a Ray GPU actor: the sandbox's local executor on its GPU."""
    return _local_gpu().evaluate(request, progress=progress, cancel=cancel)


_LOCAL: dict[str, Executor] = {}
_LOCAL_LOCK = threading.Lock()


def _stream(request: EvalRequest, evaluate: EvalFn, cancel: threading.Event) -> Iterator[tuple[str, str]]:
    """``("started", "")``, ``("progress", json)`` items, then ``("result", json)`` or
    ``("error", message)``.  The evaluation runs in a thread so progress streams while it runs."""
    events: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()

    def work() -> None:
        try:
            result = evaluate(request, lambda p: events.put(("progress", to_json(p))), cancel)
            events.put(("result", to_json(result)))
        except ExecutorError as exc:
            events.put(("error", str(exc)))
        except Exception as exc:
            log.exception("evaluation of %s failed", request.id)
            events.put(("error", f"{type(exc).__name__}: {exc}"))

    threading.Thread(target=work, name=f"eval-{request.id}", daemon=True).start()
    yield "started", ""
    while True:
        kind, payload = events.get()
        yield kind, payload
        if kind != "progress":
            return


class _GpuActor:
    """The Ray actor that holds one GPU for the executor's life and evaluates there (threaded:
    ``cancel`` runs beside ``evaluate``)."""

    def __init__(self, evaluate: EvalFn) -> None:
        self._evaluate = evaluate
        self._cancels: dict[str, threading.Event] = {}

    def where(self) -> tuple[str, int]:
        """(node address, the GPU's index on that node, or -1 for an actor without a GPU)."""
        import ray

        ids = ray.get_gpu_ids()
        return ray.util.get_node_ip_address(), int(ids[0]) if ids else -1

    def evaluate(self, request_json: str) -> Iterator[tuple[str, str]]:
        request = from_json(EvalRequest, request_json)
        cancel = self._cancels[request.id] = threading.Event()
        try:
            yield from _stream(request, self._evaluate, cancel)
        finally:
            self._cancels.pop(request.id, None)

    def cancel(self, request_id: str) -> None:
        if (event := self._cancels.get(request_id)) is not None:
            event.set()

    def device(self) -> str:
        return to_json(_local_gpu().device_info())


class _RayLane(Executor):
    """One GPU of the cluster: requests stream to its actor."""

    def __init__(self, ray: Any, actor: Any, label: str) -> None:
        self._ray, self._actor, self.label = ray, actor, label

    def device_info(self) -> DeviceInfo:
        return from_json(DeviceInfo, self._call(self._actor.device.remote()))

    def _call(self, ref: Any) -> Any:
        try:
            return self._ray.get(ref)
        except self._ray.exceptions.RayError as exc:
            raise WorkerUnavailable(f"the Ray actor of {self.label} failed: {exc}") from exc

    def evaluate(
        self,
        request: EvalRequest,
        *,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
    ) -> EvalResult:
        ray = self._ray
        stream: Any = self._actor.evaluate.remote(to_json(request))  # an ObjectRefGenerator
        started: float | None = None
        while True:
            if cancel is not None and cancel.is_set():
                self._actor.cancel.remote(request.id)
                return cancelled_result(request, "cancelled")
            ready, _ = ray.wait([stream], timeout=0.1)
            if not ready:
                if started is not None and time.monotonic() - started > run_budget_s(request):
                    ray.cancel(stream, force=True)
                    raise WorkerUnavailable(f"Ray task for {request.id} did not finish within its budget")
                continue
            try:
                kind, payload = ray.get(next(stream))
            except StopIteration:
                raise WorkerUnavailable(f"Ray task for {request.id} ended without a result") from None
            except ray.exceptions.RayError as exc:
                raise WorkerUnavailable(f"Ray task for {request.id} on {self.label} failed: {exc}") from exc
            if kind == "started":
                started = time.monotonic()
            elif kind == "result":
                return from_json(EvalResult, payload)
            elif kind == "error":
                raise WorkerUnavailable(f"Ray task for {request.id} failed: {payload}")
            elif progress is not None:
                progress(from_json(Progress, payload))

    def close(self) -> None:
        self._ray.kill(self._actor)


class RayExecutor(GpuScheduler):
    """Evaluates on the GPUs of a Ray cluster: one actor per GPU (``num_gpus`` each), scheduled
    like local GPUs (:mod:`sandbox.scheduler`: a request and a kernel stay on one GPU; a dead actor's
    request runs again on another).

    ``address``: the cluster (``ray://head:10001`` or ``auto``); None uses ``RAY_ADDRESS`` or, if
    unset, starts a local instance.  ``gpus``: how many actors (default: every GPU of the cluster,
    at least one); each holds ``num_gpus`` GPUs and ``num_cpus`` CPUs for its life.  ``init``: extra keyword arguments for ``ray.init`` (e.g. ``runtime_env``; tests
    pass ``num_cpus``).  ``evaluate``: the actors' evaluation (test seam); the default runs the
    sandbox's local executor on the actor's GPU.  ``start_timeout_s``: how long the actors may
    wait for GPUs to be free before :class:`WorkerUnavailable`.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        gpus: int | None = None,
        num_gpus: float = 1,
        num_cpus: float = 1,
        evaluate: EvalFn = _evaluate_on_local_gpu,
        init: dict[str, Any] | None = None,
        start_timeout_s: float = 120.0,
    ) -> None:
        try:
            import ray
        except ImportError as exc:
            raise ExecutorError(
                f"the Ray executor needs the `cluster` extra: {install_hint('cluster')}"
            ) from exc
        where = address or os.environ.get("RAY_ADDRESS") or "a local Ray instance"
        if not ray.is_initialized():
            try:
                ray.init(address=address or os.environ.get("RAY_ADDRESS"), **(init or {}))
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise WorkerUnavailable(f"cannot connect to the Ray cluster at {where}: {exc}") from exc
        total = ray.cluster_resources().get("GPU", 0)
        count = gpus or (int(total // num_gpus) if num_gpus else 0) or 1
        actor: Any = ray.remote(_GpuActor).options(
            num_gpus=num_gpus, num_cpus=num_cpus, max_concurrency=8, max_restarts=0
        )
        actors: list[Any] = [actor.remote(evaluate) for _ in range(count)]
        try:
            places = ray.get([a.where.remote() for a in actors], timeout=start_timeout_s)
        except (ray.exceptions.GetTimeoutError, ray.exceptions.RayError) as exc:
            for a in actors:
                ray.kill(a)
            raise WorkerUnavailable(
                f"{count} Ray actors with {num_gpus:g} GPU each did not start within {start_timeout_s:.0f} s "
                f"on {where} ({total:g} GPUs in the cluster): {type(exc).__name__}"
            ) from exc
        lanes = []
        for position, (a, (node, gpu)) in enumerate(zip(actors, places, strict=True)):
            index = gpu if gpu >= 0 else position
            label = f"GPU {gpu} of {node}" if gpu >= 0 else f"Ray actor {position} on {node}"
            lanes.append(Lane(_RayLane(ray, a, label), index, label))
        super().__init__(lanes)
