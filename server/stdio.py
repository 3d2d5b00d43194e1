"""The language server's stdin, guarded: only well-formed LSP frames reach pygls.

pygls 2 reads a frame as header lines (``readline``) then ``read(Content-Length)``: a header of
``Content-Length: 99999999999`` allocates that much, and a malformed one leaves it reading the body
as headers, out of step for good.  :class:`GuardedStdin` reads the real stream on its own daemon
thread and hands pygls canonical frames: a header block whose length is missing, malformed, zero or
over :data:`MAX_FRAME_BYTES` is dropped and the reader, a line of at most 4 KiB at a time, finds
the next ``Content-Length:`` header, and :meth:`close` (on ``exit`` or SIGTERM) ends pygls' read at once,
even while the client keeps stdin open.
"""

from __future__ import annotations

import collections
import logging
import os
import queue
import threading

log = logging.getLogger(__name__)

MAX_FRAME_BYTES = 64 << 20  # far above any document an editor sends
_MAX_HEADER_LINE = 4096
_HEADER = b"Content-Length:"
_POLL_S = 0.05


class GuardedStdin:
    """A binary stream with the two methods pygls reads through (``readline``, ``read``)."""

    def __init__(self, fd: int, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self.fd = fd  # read with os.read: a daemon thread blocked in a buffered reader's lock
        self.max_frame_bytes = max_frame_bytes  # would abort the interpreter at exit
        self._buf = bytearray()
        self._frames: queue.Queue[bytes | None] = queue.Queue(maxsize=4)
        self._lines: collections.deque[bytes] = collections.deque()
        self._body = b""
        self._closed = threading.Event()
        threading.Thread(target=self._pump, name="lsp-stdin", daemon=True).start()

    def close(self) -> None:
        """End the stream for pygls (its pending ``readline`` answers EOF within ``_POLL_S``)."""
        self._closed.set()

    def readline(self, size: int = -1) -> bytes:
        if not self._lines:
            while True:
                if self._closed.is_set():
                    return b""
                try:
                    frame = self._frames.get(timeout=_POLL_S)
                    break
                except queue.Empty:
                    continue
            if frame is None:
                self._closed.set()
                return b""
            self._lines.extend((b"Content-Length: %d\r\n" % len(frame), b"\r\n"))
            self._body = frame
        return self._lines.popleft()

    def read(self, size: int = -1) -> bytes:
        body, self._body = self._body, b""
        return body

    # ---------------------------------------------------------------- the reading thread

    def _pump(self) -> None:
        try:
            while not self._closed.is_set():
                frame = self._next_frame()
                if frame is None:
                    break
                while not self._closed.is_set():
                    try:
                        self._frames.put(frame, timeout=_POLL_S)
                        break
                    except queue.Full:
                        continue
        except (OSError, ValueError) as exc:  # stdin closed under us
            log.info("stdin: %s", exc)
        finally:
            try:
                self._frames.put_nowait(None)
            except queue.Full:
                self._closed.set()

    def _next_frame(self) -> bytes | None:
        """The next frame's body with a valid length; None at the end of the stream."""
        while True:
            length = self._header()
            if length is None:
                return None
            if not 0 < length <= self.max_frame_bytes:
                log.warning("dropped a frame whose Content-Length is missing, malformed or too large")
                continue  # what follows is read as headers until the next Content-Length
            return self._read(length)

    def _header(self) -> int | None:
        """Read one header block: its Content-Length, -1 when it has none that is valid, None at EOF."""
        length: int | None = None
        seen = False
        while True:
            line = self._readline()
            if not line:
                return None
            at = line.find(_HEADER)
            if at > 0:  # the body of a frame we could not size, then the next header: resync there
                line, length, seen = line[at:], None, False
            if not line.strip():
                if seen:
                    return -1 if length is None else length
                continue  # blank lines between frames
            seen = True
            if line.startswith(_HEADER):
                value = line[len(_HEADER) :].strip()
                length = int(value) if value.isdigit() and len(value) <= 15 else None

    def _fill(self) -> bool:
        chunk = os.read(self.fd, 1 << 16)
        self._buf += chunk
        return bool(chunk)

    def _readline(self) -> bytes:
        """Up to and including the next newline, at most 4 KiB; b"" at the end of the stream."""
        while (end := self._buf.find(b"\n", 0, _MAX_HEADER_LINE)) < 0 and len(self._buf) < _MAX_HEADER_LINE:
            if not self._fill():
                break
        size = end + 1 if end >= 0 else min(len(self._buf), _MAX_HEADER_LINE)
        line = bytes(self._buf[:size])
        del self._buf[:size]
        return line

    def _read(self, n: int) -> bytes | None:
        """Exactly ``n`` bytes; None if the stream ends first."""
        while len(self._buf) < n:
            if not self._fill():
                return None
        body = bytes(self._buf[:n])
        del self._buf[:n]
        return body
