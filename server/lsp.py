"""The language server object: document state, settings, results, logging to the client.

State lives on :class:`CudaLanguageServer` and is mutated only on pygls' asyncio event loop.  Each
open ``.cu``/``.cuh`` file is an immutable :class:`cudasrc.source.Document` (text + tree-sitter
tree) replaced on every change through the source model's incremental edit API; the current
:class:`OpenDocument` (uri, version, document) is itself the snapshot background work receives.
Features (one module each) register their handlers in a ``setup(ls)`` function called by
:func:`create_server`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Generator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import cattrs
from lsprotocol import types as lsp
from pygls.exceptions import (
    FeatureRequestError,
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
)
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method
from pygls.uris import to_fs_path

from base.errors import CudaAgentError
from cudasrc import specs as specs
from cudasrc.source import Document
from cudasrc.syntax import Kernel, Span
from sandbox.contract import Resources
from server import protocol as wire
from server.settings import SECTION, Settings, parse_settings
from server.store import Changes, ResultStore, Watcher

log = logging.getLogger(__name__)

LANGUAGE_IDS = frozenset({"cuda-cpp", "cuda"})
SUFFIXES = (".cu", ".cuh")
MAX_DOCUMENT_BYTES = 8 << 20  # larger documents are tracked but not parsed

T = TypeVar("T")


@dataclass(frozen=True)
class OpenDocument:
    """One version of an open file: what every feature reads, and the snapshot background work gets.

    ``doc`` is None when the file is too large to analyse (see :data:`MAX_DOCUMENT_BYTES`).
    ``cache`` memoises per-version views (symbols, lenses...): it dies with this version.
    """

    uri: str
    version: int
    path: Path
    doc: Document | None
    text: str
    cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def cached(self, key: str, compute: Callable[[], T]) -> T:
        if key not in self.cache:
            self.cache[key] = compute()
        return self.cache[key]

    @property
    def kernels(self) -> tuple[Kernel, ...]:
        return self.doc.kernels if self.doc is not None else ()

    def kernel(self, name: str) -> Kernel | None:
        return self.doc.kernel(name) if self.doc is not None else None

    def spec(self, kernel: Kernel) -> KernelSpecView:
        """The spec written above ``kernel``."""
        if self.doc is None:
            return spec_view(kernel, {})
        return spec_view(kernel, self.doc.type_aliases, self.doc.integer_constants)


_SPEC_MEMO: OrderedDict[tuple[Any, ...], KernelSpecView] = OrderedDict()
_SPEC_MEMO_SIZE = 4096


GC_YOUNG_THRESHOLD = 20_000


def spec_view(
    kernel: Kernel, aliases: Mapping[str, str], names: Mapping[str, int] | None = None
) -> KernelSpecView:
    """:func:`cudasrc.specs.parse`, memoised on what it reads: the comment block (with its lines), the
    kernel's name and parameters, the file's type aliases and integer constants.  A keystroke re-parses only the kernel
    it lands in."""
    key = (
        tuple(sorted(aliases.items())),
        tuple(sorted((names or {}).items())),
        kernel.qualified_name,
        kernel.comment,
        tuple(
            (p.name, p.type_text, p.base_type, p.pointer, p.const, p.restrict, p.reference)
            for p in kernel.params
        ),
        kernel.template_params,
        kernel.span.start_line,
    )
    view = _SPEC_MEMO.get(key)
    if view is None:
        spec, errors = specs.parse(kernel, aliases, names)
        view = KernelSpecView(spec if not errors else None, errors, spec is not None)
        _SPEC_MEMO[key] = view
        if len(_SPEC_MEMO) > _SPEC_MEMO_SIZE:
            _SPEC_MEMO.popitem(last=False)
    else:
        _SPEC_MEMO.move_to_end(key)
    return view


@dataclass(frozen=True)
class KernelSpecView:
    """A kernel's written spec: ``spec`` is None when there is none (``written`` False) or it has errors."""

    spec: specs.KernelSpec | None
    errors: tuple[specs.SpecError, ...]
    written: bool


@dataclass(frozen=True)
class LastCheck:
    """What the last check of a document compiled: each kernel's ptxas resources, for ``arch``
    (written by the diagnostics, read by the hover)."""

    arch: str
    resources: Mapping[str, Resources]  # kernel -> ptxas resources


def lsp_range(span: Span) -> lsp.Range:
    """A source-model span as an LSP range."""
    return lsp.Range(lsp.Position(span.start_line, span.start_col), lsp.Position(span.end_line, span.end_col))


class _Protocol(LanguageServerProtocol):
    """pygls' protocol, with this server's custom requests typed (:data:`server.protocol.REQUEST_TYPES`),
    answering a request whose params do not fit its method with InvalidParams that say which field
    (pygls drops such a request unanswered, and the client would wait for it forever)."""

    def __init__(self, server: LanguageServer, converter: cattrs.Converter) -> None:
        super().__init__(server, converter)
        wire.register(converter)

    def get_message_type(self, method: str) -> Any:  # type: ignore[override]  # pygls caches its own
        return wire.REQUEST_TYPES.get(method) or super().get_message_type(method)

    def structure_message(self, data: dict[str, Any]) -> Any:
        msg_id = data.get("id")
        if "jsonrpc" in data and (
            isinstance(msg_id, bool) or not isinstance(msg_id, int | float | str | None)
        ):
            # JSON-RPC: an id is a string, a number or null; an invalid one is answered with a null
            # id, never echoed back (pygls' own response would drop the id field altogether)
            refused = JsonRpcInvalidRequest("invalid request id: it must be a string or a number")
            reply = {"code": refused.code, "message": refused.message}
            self._send_data({"jsonrpc": "2.0", "id": None, "error": reply})
            raise refused
        try:
            message = super().structure_message(data)
        except JsonRpcException as exc:
            if "id" in data and "method" in data:
                error = JsonRpcInvalidParams(f"invalid params for {data['method']}{_why(exc)}")
                self._send_response(data["id"], error=error.to_response_error())
            raise
        method = data.get("method")
        if "jsonrpc" in data and "id" in data and isinstance(method, str) and _is_notification(method):
            # pygls would handle it as the notification and never answer: the client would wait
            refused = JsonRpcInvalidRequest(f"{method} is a notification: send it without an id")
            self._send_response(data["id"], error=refused.to_response_error())
            raise refused
        return message

    def _send_handler_result(self, future: Future[Any], *, msg_id: Any) -> None:
        """A request that failed with one of our errors answers with the code its branch of the
        tree gives (:attr:`~base.errors.CudaAgentError.rpc_code`: InvalidParams for an
        :class:`~base.errors.InputError`) and its message; anything else as pygls answers it."""
        error = None if future.cancelled() else future.exception()
        if isinstance(error, CudaAgentError):
            self._request_futures.pop(msg_id, None)
            reply = JsonRpcException(str(error), code=error.rpc_code)
            self._send_response(msg_id, error=reply.to_response_error())
            return
        super()._send_handler_result(future, msg_id=msg_id)

    @lsp_method(lsp.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(self, params: lsp.ExecuteCommandParams) -> Generator[Any, Any, Any]:
        """pygls' command dispatch (typed arguments), with errors that say which argument is wrong
        (no ``arguments`` at all is InvalidParams too: pygls would call the command without them)."""
        if params.arguments is None:
            params = lsp.ExecuteCommandParams(params.command, [], params.work_done_token)
        try:
            return (yield from super().lsp_workspace__execute_command(params))
        except JsonRpcInvalidParams as exc:
            why = _why(exc)
            if not why:
                raise
            raise JsonRpcInvalidParams(f"invalid arguments for {params.command}{why}") from None


def _is_notification(method: str) -> bool:
    """An LSP notification (it has no response type), not one of this server's requests."""
    types = lsp.METHOD_TO_TYPES.get(method)
    return types is not None and types[1] is None and method not in wire.REQUEST_TYPES


def _camel_path(message: str) -> str:
    """cattrs' ``... @ arguments.run_id`` with the path in the wire's casing (``arguments.runId``)."""
    what, sep, where = message.rpartition(" @ ")
    return f"{what} @ {'.'.join(wire.camel(p) for p in where.split('.'))}" if sep else message


def _why(exc: BaseException) -> str:
    """``: <what is wrong, where>`` from the cattrs error behind ``exc`` ("" when there is none)."""
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, cattrs.ClassValidationError):
        return ": " + "; ".join(_camel_path(m) for m in cattrs.transform_error(cause, path="arguments"))
    return ""


class CudaLanguageServer(LanguageServer):
    """pygls server holding all state of the CUDA Agent language server."""

    def __init__(self) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            ver = version("cuda-agent")
        except PackageNotFoundError:
            ver = "0"
        super().__init__(
            "cuda-agent",
            ver,
            text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
            protocol_cls=_Protocol,
        )
        self.documents: dict[str, OpenDocument] = {}
        self.settings = Settings()
        self.initialization_options: dict[str, Any] = {}
        self.store = ResultStore(None)
        self.watcher: Watcher | None = None
        self.generation = 0  # bumped whenever stored results change (part of view cache keys)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.ready = False  # the client sent `initialized`: notifications may flow
        self.shut_down = False  # the client sent `shutdown` (an `exit` without it exits with status 1)
        self.on_settings: list[Callable[[Settings], None]] = []
        self.on_document: list[Callable[[OpenDocument, str], None]] = []  # (doc, "open"|"change"|"save")
        self.on_close: list[Callable[[str], None]] = []
        self.on_outside_change: list[Callable[[Changes], None]] = []
        self.on_ready: list[Callable[[], None]] = []  # the client sent `initialized`
        self.on_shutdown: list[Callable[[], Awaitable[None]]] = []  # awaited before the answer to `shutdown`
        self.on_stop: list[Callable[[], None]] = []
        # what each feature offers on a kernel under the cursor (textDocument/codeAction), in order
        self.kernel_actions: list[Callable[[OpenDocument, Kernel], list[lsp.CodeAction]]] = []
        self.last_check: dict[str, LastCheck] = {}  # uri -> what the last check compiled (diagnostics)
        self._parts: dict[type, object] = {}

    # ------------------------------------------------------------------ features' parts

    def add_part(self, part: object) -> None:
        """Keep the state object a feature's ``setup`` made (the runs, the checker...), one per type:
        other features find it by its type (:meth:`part`), so this module imports none of them."""
        self._parts[type(part)] = part

    def part(self, kind: type[T]) -> T | None:
        """The part of type ``kind``, None when its feature is not set up."""
        found = self._parts.get(kind)
        return found if isinstance(found, kind) else None

    def need(self, kind: type[T]) -> T:
        """The part of type ``kind``, which the caller's feature cannot work without."""
        found = self.part(kind)
        if found is None:
            raise LookupError(f"no {kind.__name__}: its feature is not set up")
        return found

    # ------------------------------------------------------------------ documents

    def document(self, uri: str) -> OpenDocument | None:
        return self.documents.get(uri)

    def open(self, item: lsp.TextDocumentItem) -> OpenDocument | None:
        if item.language_id not in LANGUAGE_IDS and not item.uri.endswith(SUFFIXES):
            return None
        path = Path(to_fs_path(item.uri) or item.uri)
        od = OpenDocument(item.uri, item.version, path, _parse(item.text, path), item.text)
        self.documents[item.uri] = od
        self._notify(od, "open")
        return od

    def change(self, params: lsp.DidChangeTextDocumentParams) -> OpenDocument | None:
        old = self.documents.get(params.text_document.uri)
        if old is None:
            return None
        doc, text = old.doc, old.text
        try:
            for change in params.content_changes:
                if isinstance(change, lsp.TextDocumentContentChangePartial):
                    r = change.range
                    if doc is not None:
                        doc = doc.apply_change(
                            r.start.line, r.start.character, r.end.line, r.end.character, change.text
                        )
                        text = doc.text
                    else:
                        text = self.workspace.get_text_document(old.uri).source
                else:
                    doc, text = None, change.text
        except Exception:  # a change the model cannot apply: start again from pygls' own copy
            log.warning(
                "re-reading %s after a change the source model could not apply", old.uri, exc_info=True
            )
            doc, text = None, self.workspace.get_text_document(old.uri).source
        if doc is None or doc.text != text or len(doc.data) > MAX_DOCUMENT_BYTES:
            doc = _parse(text, old.path)
        od = OpenDocument(old.uri, params.text_document.version, old.path, doc, text)
        self.documents[old.uri] = od
        self._notify(od, "change")
        return od

    def kernel_ref(self, ref: wire.KernelRef) -> tuple[OpenDocument, Kernel]:
        """The document and kernel a kernel command names (``kernel`` may be left out when the file
        has one kernel); raises JsonRpcInvalidParams with a message for the user."""
        od = self.documents.get(ref.uri)
        if od is None:
            raise JsonRpcInvalidParams(f"{ref.uri} is not open in the editor")
        name = ref.kernel
        if name is None and len(od.kernels) == 1:
            return od, od.kernels[0]
        k = od.kernel(name) if name is not None else None
        if k is None:
            known = ", ".join(x.qualified_name for x in od.kernels) or "none"
            raise JsonRpcInvalidParams(f"no kernel {name!r} in {od.path.name} (kernels: {known})")
        return od, k

    def saved(self, uri: str) -> None:
        od = self.documents.get(uri)
        if od is not None:
            self._notify(od, "save")

    def close(self, uri: str) -> None:
        if self.documents.pop(uri, None) is not None:
            for fn in self.on_close:
                fn(uri)

    def _notify(self, od: OpenDocument, why: str) -> None:
        for fn in self.on_document:
            fn(od, why)

    # ------------------------------------------------------------------ settings, results

    def apply_settings(self, data: Any) -> None:
        """Parse the client's ``cudaAgent`` settings over the initialization options."""
        merged = (
            _merge(self.initialization_options, data)
            if isinstance(data, dict)
            else self.initialization_options
        )
        settings, problems = parse_settings(merged)
        for p in problems:
            log.warning("setting %s.%s", SECTION, p)
        if settings != self.settings:
            self.settings = settings
            log.info(
                "settings: executor %s, proposer %s, arch %s",
                settings.executor.kind,
                settings.proposer.kind,
                settings.arch,
            )
            for fn in self.on_settings:
                fn(settings)

    def open_workspace(self, root: Path | None) -> None:
        self.store = ResultStore(root)
        if root is not None and root.is_dir() and self.loop is not None:
            self.watcher = Watcher(root, self.loop, self._outside_change)
            self.watcher.start()

    def results_changed(self) -> None:
        """Stored results changed (a run finished, or outside the editor): refresh lenses and hints."""
        self.generation += 1
        caps = self.client_capabilities.workspace
        if caps is not None and caps.code_lens is not None and caps.code_lens.refresh_support:
            self.workspace_code_lens_refresh(None)
        if caps is not None and caps.inlay_hint is not None and caps.inlay_hint.refresh_support:
            self.workspace_inlay_hint_refresh(None)

    def _outside_change(self, changes: Changes) -> None:
        if changes.results and self.store.reload():
            log.info("results changed outside the editor; refreshing")
            self.results_changed()
        for fn in self.on_outside_change:
            fn(changes)

    # ------------------------------------------------------------------ threads -> loop

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the event loop (safe from any thread)."""
        if self.loop is None:
            return
        if _on_loop(self.loop):
            fn(*args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Unexpected errors go to the log, not pop-ups (requests already answer with the error)."""
        if source is not FeatureRequestError:
            log.error("internal error: %s", error)

    def stop(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None
        for fn in self.on_stop:
            fn()
        self.on_stop.clear()


def _parse(text: str, path: Path) -> Document | None:
    if len(text) > MAX_DOCUMENT_BYTES:
        log.warning("%s: %d characters; too large to analyse", path, len(text))
        return None
    return Document(text, str(path))


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``, recursively for nested objects."""
    out = dict(base)
    for key, value in over.items():
        old = out.get(key)
        out[key] = _merge(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return out


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


# ------------------------------------------------------------------------------------- logging


class ClientLogHandler(logging.Handler):
    """Forwards log records to the client as ``window/logMessage`` (never stdout)."""

    LEVELS = (
        (logging.ERROR, lsp.MessageType.Error),
        (logging.WARNING, lsp.MessageType.Warning),
        (logging.INFO, lsp.MessageType.Info),
        (0, lsp.MessageType.Log),
    )

    def __init__(self, ls: CudaLanguageServer) -> None:
        super().__init__()
        self.ls = ls
        self._busy = threading.local()
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    # pygls' warning when the client cancels a request that was already answered (lenses, hints):
    # routine, and repeated on every keystroke
    QUIET = ("Cancel notification for unknown message id",)

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(self._busy, "on", False):  # sending a message logged something: drop it
            return
        if isinstance(record.msg, str) and record.msg.startswith(self.QUIET):
            return
        kind = next(t for level, t in self.LEVELS if record.levelno >= level)
        try:
            message = self.format(record)
        except Exception:
            self.handleError(record)
            return
        self.ls.call_soon(self._send, lsp.LogMessageParams(type=kind, message=message))

    def _send(self, params: lsp.LogMessageParams) -> None:
        self._busy.on = True
        try:
            self.ls.window_log_message(params)
        except Exception:  # the client went away; nothing left to tell
            pass
        finally:
            self._busy.on = False


def install_logging(ls: CudaLanguageServer, level: int = logging.INFO) -> None:
    """Our packages log at ``level`` to the client; pygls' own chatter only from warnings up."""
    handler = ClientLogHandler(ls)
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    for name in ("base", "sandbox", "cudasrc", "engine", "agent", "learning", "server"):
        logging.getLogger(name).setLevel(level)


# ------------------------------------------------------------------------------------- wiring
