"""Diagnostics: NVRTC errors and warnings, spec errors, register spills, cheap performance lints.

Checks run off the event loop on a snapshot (an :class:`OpenDocument`: uri, version, text), in
one spawned checker process (see :class:`CheckerProcess`), at once when a file is opened or
saved, and after ``diagnosticsDelayMs`` of quiet after a change.  One check per document at a time; a change during
a check queues one more.  A result for a version that is no longer current is dropped, never
published.  Each diagnostic has a ``code`` and a ``codeDescription`` link to its explanation in
``docs/diagnostics.md``.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import re
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

import tree_sitter
from lsprotocol import types as lsp

from agent.check import FileCheck, KernelCheck, check_document
from cudasrc import specs as specs
from cudasrc.source import Document
from cudasrc.syntax import LANGUAGE, Kernel
from sandbox.compiler import CompilerUnavailable
from sandbox.contract import Diagnostic, Problem, Resources
from server.lsp import CudaLanguageServer, LastCheck, OpenDocument, lsp_range, spec_view
from server.settings import Settings, compile_options
from server.store import Changes

log = logging.getLogger(__name__)

SOURCE = "cuda-agent"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "diagnostics.md"
WARP = 32

# code -> default severity (the anchors of docs/diagnostics.md)
CODES: dict[str, lsp.DiagnosticSeverity] = {
    "nvrtc-error": lsp.DiagnosticSeverity.Error,
    "nvrtc-warning": lsp.DiagnosticSeverity.Warning,
    "syntax": lsp.DiagnosticSeverity.Warning,
    "spec-error": lsp.DiagnosticSeverity.Error,
    "missing-spec": lsp.DiagnosticSeverity.Hint,
    "misplaced-spec": lsp.DiagnosticSeverity.Warning,
    "register-spill": lsp.DiagnosticSeverity.Warning,
    "block-size": lsp.DiagnosticSeverity.Warning,
    "unchecked-index": lsp.DiagnosticSeverity.Warning,
}

_CMP = tree_sitter.Query(LANGUAGE, '(binary_expression operator: ["<" ">" "<=" ">="]) @cmp')
_INDEX = tree_sitter.Query(LANGUAGE, "(subscript_expression argument: (identifier) @array)")
_QUOTED = re.compile(r'"([A-Za-z_]\w*)"')
_DIM3 = re.compile(r"^\s*dim3\s*\((?P<args>[^()]*)\)\s*$")


def diagnostic(
    code: str, rng: lsp.Range, message: str, severity: lsp.DiagnosticSeverity | None = None
) -> lsp.Diagnostic:
    return lsp.Diagnostic(
        range=rng,
        message=message,
        severity=severity or CODES[code],
        code=code,
        code_description=lsp.CodeDescription(href=f"{DOCS.as_uri()}#{code}"),
        source=SOURCE,
    )


def line_range(doc: Document, line: int) -> lsp.Range:
    """The non-blank part of a 0-based line."""
    text = doc.line_bytes(line).decode("utf-8", "replace")
    start = len(text) - len(text.lstrip())
    return lsp.Range(lsp.Position(line, start), lsp.Position(line, len(text.rstrip())))


# ------------------------------------------------------------------------------------- the check


@dataclass(frozen=True)
class CheckResult:
    """What one check of one version found."""

    uri: str
    version: int
    diagnostics: tuple[lsp.Diagnostic, ...]
    resources: dict[str, Resources]  # kernel -> ptxas resources
    arch: str = ""  # what the resources were compiled for


@dataclass(frozen=True)
class Findings:
    """What one check of one text found (crosses back from the checker process)."""

    diagnostics: tuple[lsp.Diagnostic, ...]
    resources: dict[str, Resources]  # kernel -> ptxas resources
    note: str = ""  # why compile diagnostics are missing, if they are


def diagnose(text: str, path: str, arch: str, options: tuple[str, ...]) -> Findings:
    """Everything we report for one text of a file: runs in the checker process."""
    doc = Document(text, path)
    note = ""
    try:
        file_check: FileCheck | None = check_document(doc, arch=arch, options=options)
    except CompilerUnavailable as exc:
        file_check, note = None, f"NVRTC is unavailable, compile diagnostics are off: {exc}"
    out: list[lsp.Diagnostic] = []
    resources: dict[str, Resources] = {}
    for issue in doc.issues:
        severity = {"error": lsp.DiagnosticSeverity.Error, "warning": lsp.DiagnosticSeverity.Warning}.get(
            issue.severity, lsp.DiagnosticSeverity.Information
        )
        out.append(diagnostic("syntax", line_range(doc, issue.line), issue.message, severity))
    seen: set[tuple[int, str]] = set()
    by_kernel = {kc.kernel: kc for kc in file_check.kernels} if file_check else {}
    for k in doc.kernels:
        kc = by_kernel.get(k.qualified_name)
        if kc is not None:
            out += _compiler_diagnostics(doc, Path(path), k, kc, seen)
            if kc.resources is not None:
                resources[k.qualified_name] = kc.resources
                out += _spills(k, kc.resources, arch)
        out += _spec_diagnostics(doc, k)
    for m in specs.misplaced(doc):
        rng = lsp.Range(line_range(doc, m.first).start, line_range(doc, m.last).end)
        out.append(
            diagnostic("misplaced-spec", rng, f"spec lines not directly above a kernel, ignored: {m.reason}")
        )
    out += _block_size_lints(doc)
    return Findings(tuple(out), resources, note)


class CheckerProcess:
    """Checks run in one spawned process — NVRTC, the file's model, specs, lints — so their memory
    and CPU time stay out of the server, whose event loop must answer in milliseconds (Python
    threads would share its interpreter lock).  The process exits after ``idle_s`` without work."""

    def __init__(self, idle_s: float = 60.0) -> None:
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._busy = 0
        self._last = time.monotonic()

    def run(self, od: OpenDocument, settings: Settings) -> Findings:
        """Check one version (call from a thread: blocks until the process answers)."""
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=exit_with_parent,
                    initargs=(os.getpid(),),
                )
            pool = self._pool
            self._busy += 1
        try:
            options = compile_options(settings, od.path)
            return pool.submit(diagnose, od.text, str(od.path), settings.arch, options).result()
        except BrokenProcessPool:
            with self._lock:
                if self._pool is pool:
                    self._pool = None
            return Findings((), {}, "the checker process died; diagnostics resume on the next change")
        finally:
            with self._lock:
                self._busy -= 1
                self._last = time.monotonic()

    def reap(self) -> None:
        """Stop the process if it has been idle for ``idle_s``."""
        with self._lock:
            if self._pool is not None and not self._busy and time.monotonic() - self._last >= self.idle_s:
                self._pool.shutdown(wait=False)
                self._pool = None

    def close(self) -> None:
        """Stop the process now, even in the middle of a check (its caller gets the "died" note)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            # The executor has no public way to stop a running task before Python 3.14
            # (``kill_workers``); its ``_processes`` (pid -> Process) is stable since 3.8.
            for process in list(getattr(pool, "_processes", {}).values()):
                process.kill()
            pool.shutdown(wait=False, cancel_futures=True)


def exit_with_parent(parent: int) -> None:
    """In the checker process: exit as soon as ``parent`` (the server) is gone, however it ended."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def check(od: OpenDocument, settings: Settings, checker: CheckerProcess) -> CheckResult:
    """Check one version of a document in the checker process (runs in a waiting thread)."""
    if od.doc is None:
        return CheckResult(od.uri, od.version, (), {}, settings.arch)
    found = checker.run(od, settings)
    if found.note:
        log.warning("%s", found.note)
    return CheckResult(od.uri, od.version, found.diagnostics, found.resources, settings.arch)


def _compiler_diagnostics(
    doc: Document, path: Path, k: Kernel, kc: KernelCheck, seen: set[tuple[int, str]]
) -> list[lsp.Diagnostic]:
    out = []
    for d in kc.diagnostics:
        if d.severity == "note":
            continue
        code = "nvrtc-error" if d.severity == "error" else "nvrtc-warning"
        in_file = d.line > 0 and (not d.file or Path(d.file).resolve() == path.resolve())
        key = (d.line if in_file else -1, d.message)
        if key in seen:  # kernels share dependencies: report each message once
            continue
        seen.add(key)
        if in_file:
            out.append(diagnostic(code, _compiler_range(doc, d), d.message))
        else:  # in a header: shown at the kernel, pointing at the header
            diag = diagnostic(code, lsp_range(k.name_span), f"{Path(d.file).name}:{d.line}: {d.message}")
            if d.file and d.line > 0:
                where = lsp.Location(
                    Path(d.file).resolve().as_uri(),
                    lsp.Range(lsp.Position(d.line - 1, 0), lsp.Position(d.line - 1, 0)),
                )
                diag.related_information = [lsp.DiagnosticRelatedInformation(where, d.message)]
            out.append(diag)
    return out


def _compiler_range(doc: Document, d: Diagnostic) -> lsp.Range:
    """The identifier the message quotes when it is on that line, else the column's word, else the line."""
    line = d.line - 1
    text = doc.line_bytes(line).decode("utf-8", "replace")
    m = _QUOTED.search(d.message)
    if m:
        at = text.find(m[1], max(d.column - 1, 0)) if d.column > 0 else -1
        at = at if at >= 0 else text.find(m[1])
        if at >= 0:
            return lsp.Range(lsp.Position(line, at), lsp.Position(line, at + len(m[1])))
    if d.column > 0:
        word = re.match(r"\w+|\S", text[d.column - 1 :])
        if word:
            return lsp.Range(
                lsp.Position(line, d.column - 1), lsp.Position(line, d.column - 1 + len(word[0]))
            )
    return line_range(doc, line)


def _spills(k: Kernel, r: Resources, arch: str) -> list[lsp.Diagnostic]:
    if not (r.spill_stores or r.spill_loads):
        return []
    return [
        diagnostic(
            "register-spill",
            lsp_range(k.name_span),
            f"{k.qualified_name} spills registers to local memory on {arch}: {r.registers} registers, "
            f"{r.spill_stores} bytes spill stores, {r.spill_loads} bytes spill loads",
        )
    ]


def _spec_diagnostics(doc: Document, k: Kernel) -> list[lsp.Diagnostic]:
    view = spec_view(k, doc.type_aliases, doc.integer_constants)
    spec, errors = view.spec, view.errors

    def at(line: int) -> lsp.Range:
        return line_range(doc, line) if line >= 0 else lsp_range(k.name_span)

    if not view.written:
        return [
            diagnostic(
                "missing-spec",
                lsp_range(k.name_span),
                f"{k.qualified_name} has no benchmark spec: Benchmark and Optimize need one (quick fix: add the inferred spec)",
            )
        ]
    out = [diagnostic("spec-error", at(e.line), f"spec: {e.message}") for e in errors]
    if spec is None:
        return out
    try:
        problems = specs.problems(spec)
    except specs.InvalidSpec as exc:
        return out + [diagnostic("spec-error", at(e.line), f"spec: {e.message}") for e in exc.errors]
    launch_line = spec.lines.get("launch", -1)
    for p in problems:
        threads = p.launch.block[0] * p.launch.block[1] * p.launch.block[2]
        if threads % WARP:
            out.append(_block_size(at(launch_line), threads, f"the spec's launch at {p.label}"))
            break
    out += _unchecked_index(doc, k, problems)
    return out


def _block_size(rng: lsp.Range, threads: int, where: str) -> lsp.Diagnostic:
    idle = WARP - threads % WARP
    return diagnostic(
        "block-size",
        rng,
        f"{where} uses blocks of {threads} threads, not a multiple of the warp size ({WARP}): "
        f"{idle} lanes of every block's last warp do no work",
    )


def _block_size_lints(doc: Document) -> list[lsp.Diagnostic]:
    """Launch sites whose block size is a literal (``<<<g, 100>>>``, ``dim3(10, 10)``) not a multiple of 32."""
    out = []
    for site in doc.launches:
        if site.block is None:
            continue
        threads = _literal_threads(site.block.text)
        if threads is not None and threads % WARP:
            out.append(_block_size(lsp_range(site.block.span), threads, f"this launch of {site.kernel}"))
    return out


def _literal_threads(text: str) -> int | None:
    m = _DIM3.match(text)
    parts = [a for a in m["args"].split(",") if a.strip()] if m else [text]
    total = 1
    for part in parts:
        try:
            value = specs.evaluate(part, {})
        except ValueError:
            return None
        if not isinstance(value, int) or value < 1:
            return None
        total *= value
    return total


def _unchecked_index(doc: Document, k: Kernel, problems: tuple[Problem, ...]) -> list[lsp.Diagnostic]:
    """A kernel that indexes its arrays with no comparison at all, while the spec launches more
    threads than some indexed array has elements: the extra threads read or write out of bounds."""
    if k.body_span is None:
        return []
    body = doc.tree.root_node.descendant_for_byte_range(k.body_span.start_byte, k.body_span.end_byte)
    if body is None or tree_sitter.QueryCursor(_CMP).captures(body):
        return []
    text = doc.node_text(body)
    if "threadIdx" not in text:
        return []
    indexed = {doc.node_text(n) for n in tree_sitter.QueryCursor(_INDEX).captures(body).get("array", [])}
    for p in problems:
        threads = 1
        for g, b in zip(p.launch.grid, p.launch.block, strict=True):
            threads *= g * b
        for a in p.args:
            if a.role != "scalar" and a.name in indexed and a.count < threads:
                return [
                    diagnostic(
                        "unchecked-index",
                        lsp_range(k.name_span),
                        f"{k.qualified_name} has no bounds check, but at {p.label} the spec launches {threads} "
                        f"threads for {a.name}[{a.count}]: {threads - a.count} threads index past its end",
                    )
                ]
    return []


# ------------------------------------------------------------------------------------- scheduling


class Checker:
    """Schedules checks per document and publishes their diagnostics (event loop only)."""

    def __init__(self, ls: CudaLanguageServer) -> None:
        self.ls = ls
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cuda-agent-check")
        self.checker = CheckerProcess()
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.running: set[str] = set()
        self.again: set[str] = set()

    def schedule(self, uri: str, delay_s: float) -> None:
        loop = self.ls.loop
        if loop is None:
            return
        timer = self.timers.pop(uri, None)
        if timer is not None:
            timer.cancel()
        self.timers[uri] = loop.call_later(delay_s, self._start, uri)

    def _start(self, uri: str) -> None:
        self.timers.pop(uri, None)
        od = self.ls.document(uri)
        if od is None or self.ls.loop is None:
            return
        if uri in self.running:
            self.again.add(uri)
            return
        self.running.add(uri)
        future = self.ls.loop.run_in_executor(self.pool, check, od, self.ls.settings, self.checker)
        future.add_done_callback(lambda f: self._done(od, f))

    def _done(self, od: OpenDocument, future: asyncio.Future[CheckResult]) -> None:
        self.running.discard(od.uri)
        if self.ls.loop is not None:
            self.ls.loop.call_later(self.checker.idle_s + 1, self.checker.reap)
        if future.cancelled():
            return
        exc = future.exception()
        if exc is not None:
            log.error("checking %s failed: %s", od.path, exc, exc_info=exc)
        else:
            self._publish(future.result())
        if od.uri in self.again:
            self.again.discard(od.uri)
            self._start(od.uri)

    def _publish(self, result: CheckResult) -> None:
        current = self.ls.document(result.uri)
        if current is None or current.version != result.version:
            return  # stale: a newer version is (or will be) checked
        self.ls.last_check[result.uri] = LastCheck(result.arch, result.resources)
        self.ls.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(
                uri=result.uri, diagnostics=list(result.diagnostics), version=result.version
            )
        )

    def forget(self, uri: str) -> None:
        timer = self.timers.pop(uri, None)
        if timer is not None:
            timer.cancel()
        self.ls.last_check.pop(uri, None)
        self.ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.checker.close()


def setup(ls: CudaLanguageServer) -> None:
    checker = Checker(ls)
    ls.add_part(checker)

    def on_document(od: OpenDocument, why: str) -> None:
        checker.schedule(od.uri, 0.0 if why in ("open", "save") else ls.settings.diagnostics_delay_ms / 1000)

    def on_settings(settings: Settings) -> None:
        for uri in ls.documents:
            checker.schedule(uri, 0.0)

    def on_outside_change(changes: Changes) -> None:
        if changes.sources:  # a header (or the file itself) changed on disk: re-check everything open
            for uri in ls.documents:  # (the compile cache keys on the headers' contents too)
                checker.schedule(uri, 0.0)

    ls.on_document.append(on_document)
    ls.on_settings.append(on_settings)
    ls.on_close.append(checker.forget)
    ls.on_outside_change.append(on_outside_change)
    ls.on_stop.append(checker.close)
