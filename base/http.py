"""HTTP basics both services and their command lines share, standard library only: paths, limits, listening.

- :data:`HEALTH_PATH`, the one path a service answers without a token;
- :class:`ConnectionLimits`: what one client's connections may hold of a server;
- the listening policy: :func:`check_listen_policy` (no token: loopback only), :func:`check_tls`,
  :func:`listen` (a bound socket);
- :class:`QuietLog`: a recurring event logged once per key per interval.

The ASGI side (the server, auth, bodies) is :mod:`base.asgi`.  Imports no other package of this
project, and nothing beyond the standard library: HTTP clients import it too.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import socket
import ssl
import time
from collections import OrderedDict
from dataclasses import dataclass

log = logging.getLogger(__name__)

HEALTH_PATH = "/health"  # the one path open without a token
BODY_TIMEOUT_S = 10.0
MIN_BODY_RATE = 64 << 10


@dataclass(frozen=True)
class ConnectionLimits:
    """What one client's connections may hold of a server (:func:`make_server`)."""

    header_timeout_s: float = 10.0  # a connection must send a whole request head this fast
    keep_alive_s: float = 5.0  # an idle kept-alive connection is closed after this
    max_waiting_connections: int = 256  # connections that have not sent a request head yet
    trusted_proxies: tuple[str, ...] = ()  # peers whose X-Forwarded-For names the client
    body_timeout_s: float = BODY_TIMEOUT_S  # a request body must arrive this fast (408)...
    min_body_rate: int = MIN_BODY_RATE  # ...plus one second per this many declared bytes
    max_connections: int = 1024  # open connections in all (503), at most half the open-file limit
    max_connections_per_client: int = 128  # open connections from one address (503)
    max_receiving_bodies: int = 64  # connections sending a body; past it the oldest is closed
    log_interval_s: float = 60.0  # a refusal (401, 503) or disconnect is logged once per client per interval


# --------------------------------------------------------------------------- listening policy


def is_loopback(host: str) -> bool:
    """True if every address ``host`` resolves to is a loopback address."""
    try:
        infos = socket.getaddrinfo(host, None)
    except socket.gaierror:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


def check_listen_policy(host: str, token: str | None) -> str | None:
    """Why a service must not listen on ``host`` with this token, or None if it may."""
    if token or is_loopback(host):
        return None
    return (
        f"refusing to listen on {host} without --token-file: anyone who can reach it could run code on "
        "your GPU (use a token, or listen on 127.0.0.1 and connect through an SSH tunnel)"
    )


def check_tls(cert: str | None, key: str | None) -> str | None:
    """Why the TLS files cannot be used, or None (also when TLS is off)."""
    if key and not cert:
        return "--tls-key needs --tls-cert"
    if not cert:
        return None
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        return f"cannot use TLS certificate {cert}{' / key ' + key if key else ''}: {getattr(exc, 'strerror', None) or exc}"
    return None


def listen(host: str, port: int) -> socket.socket:
    """A bound, listening TCP socket (port 0: any free port). Raises OSError."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(512)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class QuietLog:
    """Logs a recurring event (a refused token, a connection refused, a client gone mid-upload)
    once per key per ``interval_s``, saying how many were left out since: a flood of them cannot
    fill the log."""

    def __init__(self, interval_s: float = 60.0) -> None:
        self.interval_s = interval_s
        self._last: OrderedDict[str, tuple[float, int]] = OrderedDict()  # key -> (logged at, left out)

    def log(self, level: int, key: str, message: str, *args: object) -> None:
        now = time.monotonic()
        logged, left_out = self._last.get(key, (-math.inf, 0))
        if now - logged < self.interval_s:
            self._last[key] = (logged, left_out + 1)
            return
        more = f" (and {left_out} more like it in the last {self.interval_s:.0f} s)" if left_out else ""
        log.log(level, message + more, *args)
        self._last[key] = (now, 0)
        self._last.move_to_end(key)
        while len(self._last) > 4096:  # many clients: forget the oldest
            self._last.popitem(last=False)


_QUIET = QuietLog()
