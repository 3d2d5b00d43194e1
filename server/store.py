"""Per-workspace results that survive a restart, and the file watcher that keeps the editor in step.

:class:`ResultStore` keeps the last benchmark, optimize, compare and profile record
(:mod:`agent.records`, the same objects the editor is sent) of each kernel in
``<workspace>/.cuda-agent/results.json``, written atomically (temp file + ``os.replace``), keyed by
the file's path relative to the workspace and the kernel's name::

    {"version": 1, "files": {"src/vadd.cu": {"vadd": {"benchmark": {...}, "optimize": {...}}}}}

:class:`Watcher` (watchdog) reports changes made outside the editor — ``git checkout``, another
tool, a second editor writing results — to ``.cuda-agent/`` and to the workspace's ``.cu``/``.cuh``
files, batched over a short quiet period and delivered on the server's event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from agent.records import BenchmarkRecord, CompareRecord, KernelResults, OptimizeRecord, ProfileRecord
from sandbox.contract import ContractError, from_dict, to_dict

log = logging.getLogger(__name__)

STORE_DIR = ".cuda-agent"
RESULTS_FILE = "results.json"
STORE_VERSION = 1
SOURCE_SUFFIXES = (".cu", ".cuh")


@dataclass(frozen=True)
class _Snapshot:
    version: int = STORE_VERSION
    files: dict[str, dict[str, KernelResults]] = field(default_factory=dict)


class ResultStore:
    """Results by (workspace-relative path, kernel name).  Without a workspace, kept in memory only.

    Called from the event loop only; writes are small and atomic.
    """

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self._files: dict[str, dict[str, KernelResults]] = {}
        self._written = ""  # what we last wrote, to tell our own writes from outside changes
        self.reload()

    @property
    def path(self) -> Path | None:
        return self.root / STORE_DIR / RESULTS_FILE if self.root else None

    def key(self, file: Path) -> str:
        """The store key of a file: its path relative to the workspace when inside it."""
        if self.root is not None:
            try:
                return file.resolve().relative_to(self.root.resolve()).as_posix()
            except ValueError:
                pass
        return file.resolve().as_posix()

    def for_file(self, file: Path) -> dict[str, KernelResults]:
        return dict(self._files.get(self.key(file), {}))

    def get(self, file: Path, kernel: str) -> KernelResults:
        return self._files.get(self.key(file), {}).get(kernel, KernelResults())

    def all(self) -> dict[str, dict[str, KernelResults]]:
        return {k: dict(v) for k, v in self._files.items()}

    def put(
        self,
        file: Path,
        kernel: str,
        *,
        benchmark: BenchmarkRecord | None = None,
        optimize: OptimizeRecord | None = None,
        compare: CompareRecord | None = None,
        profile: ProfileRecord | None = None,
    ) -> KernelResults:
        """Record a new benchmark, optimize, compare and/or profile result and write the store."""
        per_file = self._files.setdefault(self.key(file), {})
        old = per_file.get(kernel, KernelResults())
        new = replace(
            old,
            benchmark=benchmark or old.benchmark,
            optimize=optimize or old.optimize,
            compare=compare or old.compare,
            profile=profile or old.profile,
        )
        per_file[kernel] = new
        self._write()
        return new

    def reload(self) -> bool:
        """Re-read the file; True when its contents differ from what this process last wrote."""
        path = self.path
        if path is None or not path.exists():
            return False
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            log.warning("cannot read %s: %s", path, exc)
            return False
        if text == self._written:
            return False
        try:
            snapshot = from_dict(_Snapshot, json.loads(text))
        except (ContractError, json.JSONDecodeError) as exc:
            log.warning("ignoring %s: %s", path, exc)
            return False
        if snapshot.version != STORE_VERSION:
            log.warning(
                "ignoring %s: store version %s (this build writes %s)", path, snapshot.version, STORE_VERSION
            )
            return False
        self._written = text
        self._files = snapshot.files
        return True

    def _write(self) -> None:
        path = self.path
        if path is None:
            return
        text = json.dumps(to_dict(_Snapshot(files=self._files)), indent=1, sort_keys=True)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            ignore = path.parent / ".gitignore"
            if not ignore.exists():  # the store is this machine's measurements, not source
                ignore.write_text("# written by cuda-agent: its results stay out of version control\n*\n")
            fd, tmp = tempfile.mkstemp(prefix=".results-", suffix=".tmp", dir=path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
            self._written = text
        except OSError as exc:
            log.warning("cannot write %s: %s", path, exc)


# ------------------------------------------------------------------------------------- watcher


@dataclass(frozen=True)
class Changes:
    """What changed outside the editor during one quiet period."""

    results: bool  # something under .cuda-agent/
    sources: frozenset[Path]  # .cu/.cuh files created, modified, moved or deleted


class Watcher:
    """Watches a workspace folder; calls ``on_change`` on ``loop`` after ``quiet_s`` without events."""

    def __init__(
        self,
        root: Path,
        loop: asyncio.AbstractEventLoop,
        on_change: Callable[[Changes], Any],
        quiet_s: float = 0.2,
    ) -> None:
        self.root = root
        self.loop = loop
        self.on_change = on_change
        self.quiet_s = quiet_s
        self._lock = threading.Lock()
        self._results = False
        self._sources: set[Path] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._observer: Any = None

    def start(self) -> None:
        handler = _Handler(self._event)
        observer = Observer()
        observer.daemon = True
        observer.schedule(handler, str(self.root), recursive=True)
        try:
            observer.start()
        except OSError as exc:  # e.g. inotify watch limit reached
            log.warning("not watching %s for outside changes: %s", self.root, exc)
            return
        self._observer = observer

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer = None

    def _event(self, path: Path) -> None:  # watchdog's thread
        if STORE_DIR in path.parts:
            hit = "results"
        elif path.suffix in SOURCE_SUFFIXES:
            hit = "source"
        else:
            return
        with self._lock:
            if hit == "results":
                self._results = True
            else:
                self._sources.add(path)
        self.loop.call_soon_threadsafe(self._arm)

    def _arm(self) -> None:  # event loop
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.loop.call_later(self.quiet_s, self._fire)

    def _fire(self) -> None:  # event loop
        self._timer = None
        with self._lock:
            changes = Changes(self._results, frozenset(self._sources))
            self._results, self._sources = False, set()
        if changes.results or changes.sources:
            self.on_change(changes)


class _Handler(FileSystemEventHandler):
    def __init__(self, report: Callable[[Path], None]) -> None:
        self.report = report

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type in ("opened", "closed_no_write"):
            return
        for p in (event.src_path, event.dest_path):
            if p:
                self.report(Path(os.fsdecode(p)))
