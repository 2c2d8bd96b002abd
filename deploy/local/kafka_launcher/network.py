"""Ports on 127.0.0.1 and whether a broker answers on one.

:func:`broker_answers` speaks just enough of Kafka's protocol (a Metadata v4 request for no
topics) to learn that a broker has registered and serves, and how many brokers its metadata lists.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Mapping

from .install import LauncherError


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def check_port_free(port: int) -> None:
    """Fail if something listens on the port. Connections the broker closed a moment ago linger in
    TIME_WAIT on its ports; they do not stop a listener with SO_REUSEADDR (the broker's, as Java
    sets it), so they must not stop a restart on the same ports either."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            raise LauncherError(
                f"port 127.0.0.1:{port} is busy ({e.strerror}); pick another with --port"
            ) from None


def assign_ports(wanted: Mapping[str, int | None], kept: Mapping[str, int]) -> dict[str, int]:
    """A distinct port per name: the one asked for, else the one a kept data dir recorded, else a
    free one. Ports are checked free by the caller."""
    ports: dict[str, int] = {}
    for name, asked in wanted.items():
        port = asked or kept.get(name) or free_port()
        while port in ports.values():
            port = free_port()
        ports[name] = port
    return ports


def port_accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def _metadata_request(correlation_id: int) -> bytes:
    """A Metadata v4 request for no topics: enough to learn the broker is registered and serving."""
    client_id = b"timesync-launcher"
    header = struct.pack(">hhih", 3, 4, correlation_id, len(client_id)) + client_id
    body = struct.pack(">i?", 0, False)  # topics: empty array; allow_auto_topic_creation: false
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def broker_answers(port: int, timeout_s: float = 2.0, brokers: int = 1) -> bool:
    """True if 127.0.0.1:port answers a Metadata request listing at least ``brokers`` brokers
    (a cluster's metadata lists only the brokers that are registered and not fenced)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
            s.sendall(_metadata_request(7))
            size_bytes = _recv_exact(s, 4)
            (size,) = struct.unpack(">i", size_bytes)
            body = _recv_exact(s, size)
    except OSError:
        return False
    if len(body) < 12:
        return False
    correlation_id, _throttle, n_brokers = struct.unpack(">iii", body[:12])
    return correlation_id == 7 and n_brokers >= brokers


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return bytes(buf)
