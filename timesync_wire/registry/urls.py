"""Where the schema registry's credentials may go: the rules for the registry's URL, written once
for both halves (the sidecar's ``schema.registry.url``, the Spark jobs' ``--schema-registry-url``).

The registry's credentials (basic auth user info, a bearer token) are sent with every request,
so the URL decides who reads them. Refused at start:

* **credentials in the URL** (``https://user:pass@host``): a URL is shown in ``/status``, logs
  and errors, and is copied into dashboards and tickets; credentials belong in their secret keys.
  The message says so without repeating any part of the user information;
* **a query or a fragment**: the sidecar appends API paths to the URL, which a query would break,
  and a query is where tokens hide;
* **a CA file with** ``http://``: it would be silently ignored;
* **credentials over plain** ``http://`` to any host but loopback: they would cross the network
  in clear text (the basic scheme is base64, not encryption). On loopback they do not leave the
  machine (a registry or an authenticating proxy beside the sidecar, a test), as Kafka's
  ``SASL_PLAINTEXT`` is a choice a user makes knowingly; elsewhere, use ``https://``.

:func:`shown_url` is how any URL is quoted in a message: without user information or query.
Each half names its own settings in the messages (:class:`SettingNames`): its keys or options,
and where its credentials go instead of the URL.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

_SCHEMES = ("http", "https")
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


@dataclass(frozen=True, slots=True)
class SettingNames:
    """How one half names the registry's settings in a message: the URL's and the CA file's
    key or option, where credentials go instead of the URL, which settings hold them, and where
    a URL is shown."""

    url: str
    cafile: str
    credentials_instead: str
    #: What to check when the registry refuses the credentials.
    credentials: str
    shown_in: str = "logs and errors"


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` is a loopback address or one of localhost's names. Any other name may
    resolve to an outside address, so it does not count."""
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def shown_url(url: str) -> str:
    """``url`` as a message may quote it: user information, query and fragment replaced by
    ``***``. Text that does not parse as a URL but holds ``@`` shows only what follows it."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
    except ValueError:
        return "***@" + _without_query(url.rpartition("@")[2]) if "@" in url else _without_query(url)
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    elif "@" in url:  # "user:pass@host:8081" without a scheme parses as scheme "user"
        return "***@" + _without_query(url.rpartition("@")[2])
    shown = parts._replace(
        netloc=netloc, query="***" if parts.query else "", fragment="***" if parts.fragment else ""
    )
    return shown.geturl()


def _without_query(text: str) -> str:
    """``text`` up to a query or a fragment, which become ``***``."""
    head = text.split("?", 1)[0].split("#", 1)[0]
    return head if head == text else f"{head}?***"


def url_problem(url: str, names: SettingNames) -> str | None:
    """Why ``url`` cannot be the registry's base URL (``None`` when it can), to follow the URL as
    the message shows it (:func:`shown_url`); never quotes any part of it."""
    try:
        parts = urlsplit(url)
        port = parts.port  # raises for a port that is not a number in range
    except ValueError:
        return "is not a URL (a bracketed address or a port that does not parse)"
    if "@" in parts.netloc or (parts.scheme not in _SCHEMES and "@" in url):
        return (
            "holds a user name or password (user:password@ in the URL), which would be shown in "
            f"{names.shown_in}; remove it and set {names.credentials_instead}"
        )
    if parts.scheme not in _SCHEMES or not parts.hostname:
        return "must be http:// or https:// followed by a host"
    if parts.query or parts.fragment:
        return "has a query or a fragment: give the base of the registry's API (paths are appended to it)"
    del port
    return None


def credentials_problem(url: str, credentials: str | None, cafile: bool, names: SettingNames) -> str | None:
    """Why the registry's TLS or credential settings do not fit ``url`` (``None`` when they do).

    ``credentials`` names the setting that holds them (``None``: none set); ``cafile``: whether
    a CA file is set. ``url`` has passed :func:`url_problem`."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        return None
    if cafile:
        return (
            f"{names.cafile} is set but {names.url} {shown_url(url)!r} is "
            f"http://, which would ignore it; use https:// or remove {names.cafile}"
        )
    if credentials and not is_loopback_host(parts.hostname or ""):
        return (
            f"{credentials} is set but {names.url} {shown_url(url)!r} is http:// to a host "
            "other than loopback: the credentials would cross the network in clear text; use https://"
        )
    return None
