"""Recorded inputs: the bytes a program passed to a kernel, kept by content.

``cuda-agent speedup`` saves the input regions of a watched launch (:mod:`sandbox.capture`) and
verifies rewrites on them as well as on drawn data.  A request names such data by its SHA-256
(``Distribution(kind="recorded", source=<digest>)``), never by a path: the worker reads
``<store>/<digest>`` and checks the digest, so a request cannot make it read any other file,
and the same digest means the same bytes on every machine.  The store is ``CUDA_AGENT_RECORDED_DIR``,
else ``$XDG_CACHE_HOME/cuda-agent/recorded``.  A remote worker has its own store: the data must be
put there before a request names it (``put``).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path

from base.errors import InputError

_DIGEST = re.compile(r"^[0-9a-f]{64}$")


class RecordedMissing(InputError, LookupError):
    """The store holds no data under that digest (or the file's bytes do not match it)."""


def store_dir() -> Path:
    if env := os.environ.get("CUDA_AGENT_RECORDED_DIR"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cuda-agent" / "recorded"


def is_digest(text: str) -> bool:
    return bool(_DIGEST.match(text))


def put(data: bytes, where: Path | None = None) -> str:
    """Keep ``data`` in the store; its digest (the name a request uses)."""
    digest = hashlib.sha256(data).hexdigest()
    folder = where or store_dir()
    path = folder / digest
    if path.is_file():
        return digest
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".put-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return digest


def load(digest: str, where: Path | None = None) -> bytes:
    """The bytes stored under ``digest``; :class:`RecordedMissing` when absent or altered."""
    if not is_digest(digest):
        raise RecordedMissing(f"{digest[:80]!r} is not a SHA-256 digest")
    path = (where or store_dir()) / digest
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RecordedMissing(f"no recorded input {digest[:12]} in {path.parent} ({exc.strerror})") from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise RecordedMissing(f"recorded input {digest[:12]} in {path.parent} does not match its digest")
    return data
