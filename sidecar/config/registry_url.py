"""Where the schema registry's credentials may go: the rules for ``schema.registry.url``.

The registry's credentials (``schema.registry.basic.auth.user.info``, ``schema.registry.bearer.
auth.token``) are sent with every request, so the URL decides who reads them. Refused at start:

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
The Spark job applies the same rules (``spark_consumer/schema_registry.py``; a test holds the
two equal).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from sidecar.config.exposure import is_loopback_host

_SCHEMES = ("http", "https")


def shown_url(url: str) -> str:
    """``url`` as a message may quote it: user information, query and fragment replaced by
    ``***``. Text that does not parse as a URL but holds ``@`` shows only what follows it."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
    except ValueError:
        return "***@" + url.rpartition("@")[2] if "@" in url else url
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    elif "@" in url:  # "user:pass@host:8081" without a scheme parses as scheme "user"
        return "***@" + url.rpartition("@")[2]
    shown = parts._replace(
        netloc=netloc, query="***" if parts.query else "", fragment="***" if parts.fragment else ""
    )
    return shown.geturl()


def url_problem(url: str) -> str | None:
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
            "/status, logs and errors; remove it and set schema.registry.basic.auth.user.info "
            "(from a secret, as TIMESYNC_SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO)"
        )
    if parts.scheme not in _SCHEMES or not parts.hostname:
        return "must be http:// or https:// followed by a host"
    if parts.query or parts.fragment:
        return "has a query or a fragment: give the base of the registry's API (paths are appended to it)"
    del port
    return None


def credentials_problem(url: str, credentials: str | None, cafile: bool) -> str | None:
    """Why the registry's TLS or credential settings do not fit ``url`` (``None`` when they do).

    ``credentials`` names the key that holds them (``None``: none set); ``cafile``: whether
    ``schema.registry.ssl.cafile`` is set. ``url`` has passed :func:`url_problem`."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        return None
    if cafile:
        return (
            f"schema.registry.ssl.cafile is set but schema.registry.url {shown_url(url)!r} is "
            "http://, which would ignore it; use https:// or remove schema.registry.ssl.cafile"
        )
    if credentials and not is_loopback_host(parts.hostname or ""):
        return (
            f"{credentials} is set but schema.registry.url {shown_url(url)!r} is http:// to a host "
            "other than loopback: the credentials would cross the network in clear text; use https://"
        )
    return None
