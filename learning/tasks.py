"""Tasks: what a model is asked to make faster, and what its answer is scored against.

A task (schema ``cuda-agent.task/1``) is one kernel of a ``.cu`` file with its written spec (the
spec says how the kernel is launched, verified and timed, exactly as for ``cuda-agent optimize``).
It is named after its file (``softmax``; ``file.kernel`` when the file has several specified
kernels) and identified by ``name@hash``: the hash covers the schema, the name, the kernel and
the file's text, so a reward always says which version of a task it scored.  A reference without
the hash names the task's current version; a reference whose hash is not the current one is refused.

A PyTorch task (kind ``torch``) is a KernelBench-format ``.py`` file: ``class Model(torch.nn.Module)``
with ``get_inputs()`` and ``get_init_inputs()`` (and optionally ``get_verify_inputs()``: further
input sets, other sizes), named ``torch.<file stem>``; an answer defines ``class ModelNew``, checked
against the eager ``Model`` with fp32 pinned and timed against eager and ``torch.compile``
(``sandbox.torch_eval``).  This side never imports torch: the file is only parsed here.

A folder of ``.cu`` and ``.py`` task files is a task set (``bench/kernels`` and ``bench/torch_tasks`` are ours).  Each task is in the ``train``
or the ``eval`` split, decided by a hash of its name alone (about one task in four is ``eval``),
so editing a task never moves it between splits.  Task files are trusted: they are the server's
own configuration, never something a client sends.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from agent.target import Target, TargetError, target_for
from base.errors import InputError
from cudasrc.source import Document

TASK_SCHEMA = "cuda-agent.task/1"
HASH_CHARS = 12
EVAL_SHARE = 4  # one task name in EVAL_SHARE (by hash) is in the eval split
DEFAULT_TASKS = Path(__file__).resolve().parents[1] / "bench" / "kernels"
DEFAULT_TORCH_TASKS = DEFAULT_TASKS.parent / "torch_tasks"
TORCH_PREFIX = "torch."  # a PyTorch task's name: torch.<file stem> (beside the native tasks' names)
TORCH_REQUIRED = ("Model", "get_inputs", "get_init_inputs")  # what a KernelBench-format file defines

Split = Literal["train", "eval"]


class TaskError(InputError, ValueError):
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
        return _digest(self.kind, self.name, self.kernel, self.text)

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


def _digest(kind: str, name: str, kernel: str, text: str) -> str:
    canon = json.dumps(
        {"schema": TASK_SCHEMA, "kind": kind, "name": name, "kernel": kernel, "text": text},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canon.encode()).hexdigest()[:HASH_CHARS]


@dataclass(frozen=True)
class TorchTask:
    """One KernelBench-format task: the Python file ``text`` (read from ``path``)."""

    name: str
    text: str
    path: str = ""
    kind: Literal["torch"] = "torch"
    split: Split = field(default="train", compare=False)
    kernel: str = "Model"  # what the answer replaces (``ModelNew``)
    allow_precision: tuple[str, ...] = ()  # fp32 stays fp32

    @cached_property
    def digest(self) -> str:
        return _digest(self.kind, self.name, self.kernel, self.text)

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.digest}"

    def describe(self) -> dict[str, Any]:
        """What ``GET /tasks`` lists for this task."""
        return {
            "schema": TASK_SCHEMA,
            "task": self.ref,
            "name": self.name,
            "hash": self.digest,
            "kind": self.kind,
            "split": self.split,
            "kernel": self.kernel,
            "source": self.text,
            "allow_precision": list(self.allow_precision),
        }


AnyTask = Task | TorchTask


def load_torch_file(path: str | Path) -> TorchTask:
    """The KernelBench-format task of one ``.py`` file (parsed, never run: :class:`TaskError` when
    it does not define ``Model``, ``get_inputs`` and ``get_init_inputs`` at its top level)."""
    p = Path(path)
    text = _read(p)
    try:
        tree = ast.parse(text, str(p))
    except (SyntaxError, ValueError) as exc:
        raise TaskError(f"{p}: not Python ({exc})") from None
    defined = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    if missing := [name for name in TORCH_REQUIRED if name not in defined]:
        raise TaskError(f"{p}: not a KernelBench-format task (no {', '.join(missing)})")
    name = f"{TORCH_PREFIX}{p.stem}"
    return TorchTask(name, text, str(p), split=split_of(name))


MAX_TASK_BYTES = 8 << 20


def _read(p: Path) -> str:
    """A task file's text: a regular file of at most :data:`MAX_TASK_BYTES` (a FIFO, a device such
    as ``/dev/zero`` or a socket is refused without blocking on it or reading it)."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise TaskError(f"{p}: cannot read ({exc.strerror or exc})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TaskError(f"{p}: not a regular file (a device, FIFO or socket)")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_TASK_BYTES + 1)
    except OSError as exc:
        raise TaskError(f"{p}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > MAX_TASK_BYTES:
        raise TaskError(f"{p}: larger than {MAX_TASK_BYTES >> 20} MiB")
    return data.decode("utf-8", errors="replace")


def load_file(path: str | Path) -> list[AnyTask]:
    """The tasks of one file: a ``.py`` file's KernelBench-format task, or each kernel of a ``.cu``
    file with a usable spec (none: :class:`TaskError`)."""
    p = Path(path)
    if p.suffix == ".py":
        return [load_torch_file(p)]
    text = _read(p)
    doc = Document(text, str(p))
    tasks: list[AnyTask] = []
    errors = []
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

    def __init__(self, tasks: Iterable[AnyTask], skipped: Iterable[str] = ()) -> None:
        self.tasks: dict[str, AnyTask] = {}
        for task in tasks:
            if task.name in self.tasks:
                raise TaskError(
                    f"two tasks are named {task.name} ({self.tasks[task.name].path}, {task.path})"
                )
            self.tasks[task.name] = task
        self.skipped = tuple(skipped)  # files that hold no usable task, with why

    @classmethod
    def load(cls, paths: Iterable[str | Path]) -> TaskSet:
        """The tasks of ``.cu`` and ``.py`` files and folders of them (not recursive); files without
        a usable task are skipped and listed in :attr:`skipped`."""
        tasks: list[AnyTask] = []
        skipped: list[str] = []
        for path in paths:
            p = Path(path)
            if not p.exists():
                raise TaskError(f"{p}: no such file or folder")
            files = sorted([*p.glob("*.cu"), *p.glob("*.py")]) if p.is_dir() else [p]
            for f in files:
                try:
                    tasks.extend(load_file(f))
                except TaskError as exc:
                    skipped.append(str(exc))
        return cls(tasks, skipped)

    def __iter__(self) -> Iterator[AnyTask]:
        return iter(self.tasks.values())

    def __len__(self) -> int:
        return len(self.tasks)

    def resolve(self, ref: str) -> AnyTask:
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
