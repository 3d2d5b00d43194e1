"""Tasks: what a model is asked to make faster, and what its answer is scored against.

A task (schema ``cuda-agent.task/1``) is one kernel of a ``.cu`` file with its written spec (the
spec says how the kernel is launched, verified and timed, exactly as for ``cuda-agent optimize``).
It is named after its file (``softmax``; ``file.kernel`` when the file has several specified
kernels) and identified by ``name@hash``: the hash covers the schema, the name, the kernel and
the file's text, so a reward always says which version of a task it scored.  A reference without
the hash names the task's current version; a reference whose hash is not the current one is refused.

A folder of ``.cu`` files is a task set (``bench/kernels`` is ours).  Each task is in the ``train``
or the ``eval`` split, decided by a hash of its name alone (about one task in four is ``eval``),
so editing a task never moves it between splits.  Task files are trusted: they are the server's
own configuration, never something a client sends.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from agent.loop import Target, TargetError, target_for
from agent.source import Document

TASK_SCHEMA = "cuda-agent.task/1"
HASH_CHARS = 12
EVAL_SHARE = 4  # one task name in EVAL_SHARE (by hash) is in the eval split
DEFAULT_TASKS = Path(__file__).resolve().parents[2] / "bench" / "kernels"

Split = Literal["train", "eval"]


class TaskError(ValueError):
    """A task reference or file that cannot be used; one line."""


def split_of(name: str) -> Split:
    """The split of the task named ``name`` (stable: depends on the name only)."""
    return "eval" if int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % EVAL_SHARE == 0 else "train"


@dataclass(frozen=True)
class Task:
    """One CUDA task: kernel ``kernel`` of the file ``text`` (read from ``path``)."""

    name: str
    kernel: str
    text: str
    path: str = ""
    kind: Literal["cuda"] = "cuda"
    split: Split = field(default="train", compare=False)

    @cached_property
    def digest(self) -> str:
        canon = json.dumps(
            {
                "schema": TASK_SCHEMA,
                "kind": self.kind,
                "name": self.name,
                "kernel": self.kernel,
                "text": self.text,
            },
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(canon.encode()).hexdigest()[:HASH_CHARS]

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.digest}"

    @cached_property
    def target(self) -> Target:
        """The kernel resolved under its spec (raises :class:`TaskError` when it cannot be)."""
        try:
            return target_for(Document(self.text, self.path or f"{self.name}.cu"), self.kernel)
        except TargetError as exc:
            raise TaskError(f"task {self.name}: {exc}") from None

    def describe(self) -> dict[str, Any]:
        """What ``GET /tasks`` lists for this task."""
        t = self.target
        return {
            "schema": TASK_SCHEMA,
            "task": self.ref,
            "name": self.name,
            "hash": self.digest,
            "kind": self.kind,
            "split": self.split,
            "kernel": t.kernel,
            "spec": t.spec_text,
            "allow_precision": list(t.allow_precision),
        }


def load_file(path: str | Path) -> list[Task]:
    """The tasks of one ``.cu`` file: each kernel with a usable spec (none: :class:`TaskError`)."""
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise TaskError(f"{p}: cannot read ({exc.strerror or exc})") from None
    doc = Document(text, str(p))
    tasks, errors = [], []
    for k in doc.kernels:
        name = p.stem if len(doc.kernels) == 1 else f"{p.stem}.{k.name}"
        task = Task(name, k.name, text, str(p), split=split_of(name))
        try:
            task.target  # noqa: B018 - resolve now: a task set holds only usable tasks
        except TaskError as exc:
            errors.append(str(exc))
            continue
        tasks.append(task)
    if not tasks:
        raise TaskError(errors[0] if errors else f"{p}: no kernel")
    return tasks


class TaskSet:
    """Tasks by name, looked up by ``name`` or ``name@hash``."""

    def __init__(self, tasks: Iterable[Task], skipped: Iterable[str] = ()) -> None:
        self.tasks: dict[str, Task] = {}
        for task in tasks:
            if task.name in self.tasks:
                raise TaskError(
                    f"two tasks are named {task.name} ({self.tasks[task.name].path}, {task.path})"
                )
            self.tasks[task.name] = task
        self.skipped = tuple(skipped)  # files that hold no usable task, with why

    @classmethod
    def load(cls, paths: Iterable[str | Path]) -> TaskSet:
        """The tasks of ``.cu`` files and folders of them (not recursive); files without a usable
        spec are skipped and listed in :attr:`skipped`."""
        tasks: list[Task] = []
        skipped: list[str] = []
        for path in paths:
            p = Path(path)
            if not p.exists():
                raise TaskError(f"{p}: no such file or folder")
            for f in sorted(p.glob("*.cu")) if p.is_dir() else [p]:
                try:
                    tasks.extend(load_file(f))
                except TaskError as exc:
                    skipped.append(str(exc))
        return cls(tasks, skipped)

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks.values())

    def __len__(self) -> int:
        return len(self.tasks)

    def resolve(self, ref: str) -> Task:
        """The task ``ref`` names (``name`` or ``name@hash``); :class:`TaskError` when there is none
        or the hash is not the task's current one."""
        name, _, digest = ref.partition("@")
        task = self.tasks.get(name)
        if task is None:
            known = ", ".join(sorted(self.tasks)[:20]) or "none"
            raise TaskError(f"no task {name[:80]!r} (tasks: {known})")
        if digest and digest != task.digest:
            raise TaskError(f"task {name} is {task.ref} here, not @{digest[:40]}: the task changed")
        return task
