"""Who may reach the acting endpoints: the rule that refuses to serve them off loopback without a token."""

from __future__ import annotations

import ipaddress

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_loopback_host(host: str) -> bool:
    """Whether binding ``host`` keeps the server on loopback: a loopback address or localhost's
    names. Any other name may resolve to an outside address, so it does not count."""
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


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
