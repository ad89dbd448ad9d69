"""Whether a server answers: a network resource that does not is one line within seconds, never a silent wait.

Clients of remote services (MLflow's REST client, the Hugging Face hub) retry with back-off for
minutes and log each retry; a tracking URI with a typo or a machine without network would then
look like a hang. :func:`check_reachable` opens one TCP connection first, with a timeout.
"""

from __future__ import annotations

import socket
import urllib.parse

from simfl.errors import InputError

CONNECT_TIMEOUT = 10.0
"""Seconds a server has to accept a connection before the command is refused."""


def check_reachable(url: str, where: str, hint: str) -> None:
    """Refuse, in one line naming ``where``, an http(s) ``url`` whose server does not accept a TCP connection
    within :data:`CONNECT_TIMEOUT` seconds (other schemes pass unchecked)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise InputError(where, f"{url!r} has a port that is not a number from 0 to 65535") from None
    if not parts.hostname:
        raise InputError(where, f"{url!r} names no host")
    try:
        socket.create_connection((parts.hostname, port), timeout=CONNECT_TIMEOUT).close()
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise InputError(where, f"cannot connect to {parts.hostname}:{port} ({reason}, waited at most "
                         f"{CONNECT_TIMEOUT:g} s): {hint}") from None
