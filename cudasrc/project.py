"""A source file's project: the folder tree around it, for headers and launch sites in other files.

A kernel in ``inc/ops.cuh`` is launched from ``src/main.cpp``, or from a PyTorch extension's
launcher called by ``train.py``; its headers are found through ``-I`` folders.  The project's root
is the nearest folder above the file (at most :data:`_MAX_UP` levels) that holds a build or
repository marker (``compile_commands.json``, ``CMakeLists.txt``, ``Makefile``, ``setup.py``,
``pyproject.toml``, ``.git``), else the file's folder's parent (``inc/`` beside ``src/``; a file there
that defines a kernel of the same name launches its own, never this one: :func:`cudasrc.host.launch_of`).
Its include folders are the
``-I`` folders of its ``compile_commands.json`` when there is one, else every folder of the tree
that holds headers.  The walk is capped (:data:`_MAX_FILES` files, :data:`_MAX_DEPTH` levels)
and skips hidden, build and environment folders, so a huge workspace costs a bounded scan.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_MARKERS = ("compile_commands.json", "CMakeLists.txt", "Makefile", "setup.py", "pyproject.toml", ".git")
_MAX_UP = 4
_MAX_FILES = 2000
_MAX_DEPTH = 8
_RESCAN_S = 10.0
_SKIP = frozenset({"build", "dist", "node_modules", "venv", "__pycache__", "third_party", "external"})
HEADER_SUFFIXES = (".h", ".hpp", ".cuh", ".hh", ".inl")
HOST_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".py")


@dataclass(frozen=True)
class Project:
    root: Path
    include_dirs: tuple[Path, ...]
    sources: tuple[Path, ...]  # files that may launch kernels: C++/CUDA sources and Python


def project_of(path: str | Path) -> Project:
    """The project ``path`` belongs to (cached while the root folder is unchanged, at most
    :data:`_RESCAN_S` seconds: a file added deeper in the tree is seen after that)."""
    here = Path(path).resolve().parent
    root = _root(here)
    try:
        stamp = root.stat().st_mtime_ns
    except OSError:
        stamp = 0
    return _scan(root, stamp, int(time.monotonic() // _RESCAN_S))


def display_path(path: str) -> str:
    """``path`` as a user reads it: as given when relative, else relative to the working folder
    when under it, else absolute."""
    if not os.path.isabs(path):
        return path
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def resolve_include(including: str | Path, written: str) -> Path | None:
    """The file a quoted ``#include "written"`` in ``including`` names: next to it, else in one of
    its project's include folders; None when not found."""
    base = Path(including).resolve().parent
    for folder in (base, *project_of(including).include_dirs):
        candidate = folder / written
        if candidate.is_file():
            return candidate.resolve()
    return None


def _root(start: Path) -> Path:
    folder = start
    for _ in range(_MAX_UP + 1):
        if any((folder / m).exists() for m in _MARKERS):
            return folder
        if folder.parent == folder:
            break
        folder = folder.parent
    return start.parent if start.parent != start else start


@lru_cache(maxsize=16)
def _scan(root: Path, stamp: int, period: int) -> Project:
    del stamp, period  # part of the cache key only
    headers: list[Path] = []
    sources: list[Path] = []
    seen = 0
    for folder, dirs, files in os.walk(root):
        depth = len(Path(folder).relative_to(root).parts)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP and depth < _MAX_DEPTH)
        for name in sorted(files):
            seen += 1
            if seen > _MAX_FILES:
                break
            p = Path(folder) / name
            if not p.is_file():  # a FIFO or a device would block whoever reads it
                continue
            if p.suffix in HEADER_SUFFIXES:
                headers.append(p)
            elif p.suffix in HOST_SUFFIXES:
                sources.append(p)
        if seen > _MAX_FILES:
            break
    from_commands = _command_include_dirs(root / "compile_commands.json")
    include_dirs = (
        from_commands if from_commands is not None else tuple(dict.fromkeys(h.parent for h in headers))
    )
    return Project(root, include_dirs, tuple(sources))


def _command_include_dirs(path: Path) -> tuple[Path, ...] | None:
    """The ``-I`` folders of every entry of a compile_commands.json; None without a usable one."""
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(entries, list):
        return None
    found: list[Path] = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        directory = path.parent / str(entry.get("directory", "."))
        args = entry.get("arguments")
        try:
            words = (
                [str(a) for a in args]
                if isinstance(args, list)
                else shlex.split(str(entry.get("command", "")))
            )
        except ValueError:
            continue
        for i, a in enumerate(words):
            value = words[i + 1] if a in ("-I", "-isystem") and i + 1 < len(words) else ""
            if not value and a.startswith("-I") and len(a) > 2:
                value = a[2:]
            if value:
                found.append((directory / value).resolve())
    return tuple(dict.fromkeys(found))
