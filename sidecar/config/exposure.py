"""Who may reach the acting endpoints: the rule that refuses to serve them off loopback without a token."""

from __future__ import annotations

# Binding a loopback host keeps the server on loopback: the registry URLs' rule of what is loopback.
from timesync_wire.registry.urls import LOOPBACK_NAMES, is_loopback_host

__all__ = ["LOOPBACK_NAMES", "http_exposure", "is_loopback_host"]


def http_exposure(host: str, port: int, has_token: bool) -> str | None:
    """Why serving HTTP on ``host:port`` is refused, or ``None``.

    The acting endpoints (pause, resume, restart) trust loopback callers only when the server is
    bound to loopback: bound to any other address, loopback is no proof of who calls (a service
    mesh's proxy delivers every caller from 127.0.0.6, ``hostNetwork`` shares the node's loopback),
    so a token is required. An empty host would bind every interface, and is refused as a typo.
    """
    if port == 0:
        return None
    if not host.strip():
        return (
            "http.host is empty, which would bind every interface: set 127.0.0.1 (loopback), or "
            "0.0.0.0 together with http.auth.token"
        )
    if not has_token and not is_loopback_host(host):
        return (
            f"http.host={host} is not a loopback address and http.auth.token is not set: anyone who "
            "reaches the port could pause or restart the sidecar; set http.auth.token (from a "
            "secret, as TIMESYNC_HTTP_AUTH_TOKEN) or bind http.host to 127.0.0.1"
        )
    return None
