"""Who may call the acting endpoints (pause, resume, restart): the token, the address, the browser.

The rule, in the order it is checked:

1. **No browser.** A request that carries ``Origin`` or ``Sec-Fetch-Site`` (other than ``none``,
   a user typing the URL) comes from a web page. The sidecar serves no page, so no page may act:
   otherwise a site opened next to ``kubectl port-forward`` could ``POST /restart`` with a plain
   form (a simple request needs no CORS preflight). 403.
2. **With ``http.auth.token``:** ``Authorization: Bearer <token>``, compared in constant time, is
   the proof, from any address: 401 without it (or with bytes that are not text), 403 with a
   wrong one.
3. **Without a token:** the caller must be on loopback *and* name a loopback host in ``Host``
   (``127.0.0.1``, ``[::1]``, ``localhost``, any port): a DNS-rebinding page reaches the port
   under its own name, which is refused. 403. The configuration guarantees that this case only
   arises with the server bound to loopback (:func:`sidecar.config.http_exposure`); should it
   ever be bound elsewhere without a token, nobody may act (loopback then proves nothing: a
   service mesh's proxy delivers every caller from 127.0.0.6).

A refusal is Kafka Connect's error shape, ``{"error_code": ..., "message": ...}``; the message
never repeats the token or what was sent.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable

from aiohttp import web

from sidecar.config import is_loopback_host

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error(status: int, message: str) -> web.Response:
    """Kafka Connect's error body."""
    return web.json_response({"error_code": status, "message": message}, status=status)


def on_loopback(request: web.Request) -> bool:
    """Whether the peer's address is a loopback address."""
    try:
        return ipaddress.ip_address(request.remote or "").is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The name in a ``Host`` header, without its port (``[::1]:8080`` → ``::1``)."""
    header = header.strip()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def from_a_browser(request: web.Request) -> bool:
    """Whether a web page sent this request (browsers add these headers; curl, probes and
    Prometheus do not)."""
    site = request.headers.get("Sec-Fetch-Site")
    return "Origin" in request.headers or (site is not None and site != "none")


def _token_matches(given: str, expected: bytes) -> bool:
    # aiohttp decodes header bytes that are not UTF-8 with surrogateescape; encoding them back the
    # same way keeps the comparison in bytes, constant time, and free of UnicodeEncodeError.
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected)


def guarded(token: str, handler: Handler, bound_to_loopback: bool = True) -> Handler:
    """``handler`` behind the acting endpoints' rule (see the module docstring).

    ``bound_to_loopback``: whether the server listens on loopback only; without a token, that is
    the only case in which a loopback caller is trusted."""
    expected = f"Bearer {token}".encode()

    async def check(request: web.Request) -> web.StreamResponse:
        if from_a_browser(request):
            return error(
                403, "acting endpoints refuse requests from web pages (Origin or Sec-Fetch-Site set)"
            )
        if token:
            given = request.headers.get("Authorization", "")
            if not given.startswith("Bearer "):
                return error(
                    401, "send the token as 'Authorization: Bearer <token>' (http.auth.token is set)"
                )
            if not _token_matches(given, expected):
                return error(403, "the bearer token does not match http.auth.token")
            return await handler(request)
        if not bound_to_loopback:
            return error(
                403, "http.auth.token is not set and the server is not bound to loopback: nobody may act"
            )
        if not on_loopback(request):
            return error(403, "this endpoint answers only on loopback unless http.auth.token is set")
        if not is_loopback_host(host_name(request.headers.get("Host", ""))):
            return error(403, "the Host header must name loopback (127.0.0.1, [::1] or localhost)")
        return await handler(request)

    return check
