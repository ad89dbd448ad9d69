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


def endpoint(address: str, where: str) -> tuple[str, int] | None:
    """The (host, port) a Ray-style address names (``host:port``, ``scheme://host:port``), or None when it names
    no port (``local``, ``auto``, a bare host); a port that is not a number from 1 to 65535 is refused."""
    parts = urllib.parse.urlsplit(address if "://" in address else f"tcp://{address}")
    try:
        port = parts.port
    except ValueError:
        raise InputError(where, f"{address!r} has a port that is not a number from 1 to 65535") from None
    if port == 0:
        raise InputError(where, f"{address!r} has port 0; a cluster's port is a number from 1 to 65535")
    if not parts.hostname or port is None:
        return None
    return parts.hostname, port


def check_port(host: str, port: int, where: str, hint: str) -> None:
    """Refuse, in one line naming ``where``, a ``host:port`` that does not accept a TCP connection within
    :data:`CONNECT_TIMEOUT` seconds."""
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT).close()
    except UnicodeError:
        raise InputError(where, f"cannot connect to {host}:{port}: {host!r} is not a valid host name: {hint}") from None
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise InputError(where, f"cannot connect to {host}:{port} ({reason}, waited at most "
                         f"{CONNECT_TIMEOUT:g} s): {hint}") from None


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
    check_port(parts.hostname, port, where, hint)
