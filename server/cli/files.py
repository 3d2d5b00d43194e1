"""Reading the files a command is given and writing a verified rewrite back."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from server.cli.common import JobFailed, UserError

MAX_SOURCE_BYTES = 16 << 20


def read_regular_file(path: str, what: str, limit: int = MAX_SOURCE_BYTES) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes; else one clear
    :class:`UserError` naming ``what`` was expected (a FIFO, device or socket is refused before
    it is opened: it could block or never end)."""
    import stat

    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"{path}: is a directory, expected {what}")
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{path}: not a regular file (a device, FIFO or socket), expected {what}")
    too_large = UserError(f"{path}: larger than {limit >> 20} MiB, expected {what}")
    if st.st_size > limit:
        raise too_large
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from None
    if len(data) > limit:
        raise too_large
    return data


def read_source(path: str) -> tuple[Path, str]:
    """Read a CUDA file as text; undecodable bytes become U+FFFD (and are reported by the parser).
    A binary file (it holds NUL bytes: an executable, an object file, an image) is refused."""
    data = read_regular_file(path, "a .cu/.cuh file")
    if b"\0" in data:
        raise UserError(f"{path}: a binary file, not CUDA source (expected a .cu/.cuh file)")
    return Path(path), data.decode("utf-8", errors="replace")


def read_only(path: Path) -> str | None:
    """Why ``--write`` must not write ``path`` without ``--force`` (no write permission bit)."""
    try:
        mode = path.resolve().stat().st_mode
    except OSError:
        return None  # reading it already failed or will: that error is clearer
    if not mode & 0o222:
        return f"{path} is read-only (mode {mode & 0o777:o}); nothing written (--force writes it anyway)"
    return None


def write_rewrite(path: Path, original: str, rewritten: str, *, force: bool = False) -> tuple[Path, Path]:
    """Write ``rewritten`` over FILE, keeping a backup; returns (the file written, its backup).

    A symlink is followed to the real file (the link stays a link).  Unchanged lines keep their
    exact bytes (undecodable bytes outside the rewrite survive) and a CRLF file stays CRLF.  The
    backup is a new file (``FILE.bak``, ``FILE.bak1``...) created without following a symlink at
    that name, with the file's mode and owner; the file is replaced atomically, keeping its mode
    and owner, or, when it has other hard links, rewritten in place (the links keep sharing it).
    Refused (JobFailed) when FILE changed during the run, and when it is read-only unless
    ``force``; any failure leaves nothing behind.
    """
    import errno
    import os
    import tempfile

    real = path.resolve()
    try:
        raw = real.read_bytes()
        st = real.stat()
    except OSError as exc:
        raise JobFailed(f"{path}: cannot read ({exc.strerror}); nothing written") from None
    if raw.decode("utf-8", errors="replace") != original:
        raise JobFailed(f"{path} changed during the run; nothing written (rerun to optimize the new version)")
    if not force and (why := read_only(real)):
        raise JobFailed(why)
    mode = st.st_mode & 0o7777
    created: list[Path] = []

    def own(fd: int) -> None:
        os.fchmod(fd, mode)
        if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
            with contextlib.suppress(PermissionError):  # not ours to give away: keep our ownership
                os.fchown(fd, st.st_uid, st.st_gid)

    try:
        i = 0
        while True:
            backup = real.with_name(f"{real.name}.bak{i or ''}")
            try:
                fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                break
            except FileExistsError:
                i += 1
        created.append(backup)
        with os.fdopen(fd, "wb") as f:
            own(f.fileno())
            f.write(raw)
        new = _spliced_bytes(raw, original, rewritten)
        if st.st_nlink > 1:  # a rename would split the hard links: write the shared file itself
            fd = os.open(real, os.O_WRONLY | os.O_NOFOLLOW)
            try:
                os.ftruncate(fd, 0)
                os.write(fd, new)  # a regular file: one write writes it all
            except OSError:
                os.pwrite(fd, raw, 0)  # as it was (the backup holds it too)
                raise
            finally:
                os.close(fd)
        else:
            fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.")
            created.append(Path(tmp))
            with os.fdopen(fd, "wb") as f:
                own(f.fileno())
                f.write(new)
            os.replace(tmp, real)
            created.remove(Path(tmp))
    except OSError as exc:
        for leftover in created:
            leftover.unlink(missing_ok=True)
        why = exc.strerror or str(exc)
        if exc.errno in (errno.EPERM, errno.EACCES, errno.EROFS):
            why += " (is the file immutable or its folder read-only?)"
        raise JobFailed(f"{path}: cannot write ({why}); nothing changed") from None
    return real, backup


def _spliced_bytes(raw: bytes, original: str, rewritten: str) -> bytes:
    """``rewritten`` as bytes, where lines it shares with ``original`` keep ``raw``'s exact bytes
    (``original`` is ``raw`` decoded with replacement, line for line: a newline is never part
    of an undecodable sequence)."""
    import difflib

    old, raw_lines, new = original.split("\n"), raw.split(b"\n"), rewritten.split("\n")
    crlf = b"\r\n" in raw and raw.count(b"\n") == raw.count(b"\r\n")  # a CRLF file stays one

    def encoded(j: int) -> bytes:
        line = new[j].encode("utf-8")
        return line + b"\r" if crlf and j < len(new) - 1 and not line.endswith(b"\r") else line

    if len(old) != len(raw_lines):
        return b"\n".join(encoded(j) for j in range(len(new)))
    out: list[bytes] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        out += raw_lines[i1:i2] if tag == "equal" else [encoded(j) for j in range(j1, j2)]
    return b"\n".join(out)


def read_token(path: str) -> str:
    """The bearer token in ``path`` (surrounding whitespace ignored); a warning if others may read it."""
    import logging
    import stat

    p = Path(path)
    try:
        token = read_regular_file(path, "a token file", 64 << 10).decode("utf-8").strip()
    except UserError as exc:
        raise UserError(f"{path}: cannot read the token ({exc.message.removeprefix(f'{path}: ')})") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: cannot read the token ({exc})") from None
    if not token:
        raise UserError(f"{path}: the token file is empty")
    if p.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        logging.getLogger("cuda_agent.worker").warning("%s is readable by other users; chmod 600 it", path)
    return token
