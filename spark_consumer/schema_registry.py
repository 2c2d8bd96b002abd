"""Read a subject's schemas from a Schema Registry, once, before Spark starts.

The jobs decode Avro and Protobuf values with the schemas the registry holds for the ordered
topic's subject (``<topic>-value`` unless ``--value-subject`` says otherwise). They are fetched
at plan time, through Confluent's REST API (``/subjects/<s>/versions``, ``/versions/<v>``),
which Confluent's registry serves at its root and Apicurio under ``/apis/ccompat/v7``: the URL
given is that base. Every version is read, not only the latest, because records written under
an older version carry its id and are decoded with it (see :mod:`spark_consumer.value_formats`).

The settings are named after the sidecar's (and Confluent's clients'): ``schema.registry.url``,
``schema.registry.basic.auth.user.info`` (``USER:PASSWORD``), ``schema.registry.bearer.auth.token``
and ``schema.registry.ssl.cafile``. Secrets never appear in an error or a ``repr``, and the URL
follows the sidecar's rules (``sidecar/config/registry_url.py``; a test holds the two copies
equal, as this half never imports the sidecar): no ``user:password@`` in it, no query, no CA
file with ``http://``, no credentials over ``http://`` to a host other than loopback.

**Redirects are not followed**: urllib would send ``Authorization`` to wherever a 3xx points,
another host included. The credentials go to the configured origin only; a redirect is a
one-line error saying where it pointed. Each answer is read up to :data:`MAX_ANSWER_BYTES`.

Anything that stops the fetch (no answer, a refusal, an unknown subject, a body that is not the
API's JSON) is a :class:`RegistryError`: one line, raised before Spark starts, exit status 2 like
every other mistake the CLI can see up front.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Literal

from spark_consumer.options import UsageError

SchemaType = Literal["AVRO", "PROTOBUF", "JSON"]
#: Where the registry's credentials come from: never the command line, where ``ps`` shows them.
BASIC_AUTH_ENV = "TIMESYNC_SPARK_SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO"
BEARER_TOKEN_ENV = "TIMESYNC_SPARK_SCHEMA_REGISTRY_BEARER_AUTH_TOKEN"
TIMEOUT_S = 10.0
#: The most of one answer that is read (the sidecar's bound too).
MAX_ANSWER_BYTES = 4 * 1024 * 1024
#: The most versions of one subject read (one request each); Confluent's default cap is 1,000.
MAX_VERSIONS = 10_000


class RegistryError(UsageError):
    """The registry could not give a subject's schemas; the message says why, without secrets."""


@dataclass(frozen=True, slots=True)
class RegistrySettings:
    """Where the registry is and how to authenticate. ``repr`` shows no secret."""

    url: str
    basic_auth_user_info: str | None = field(default=None, repr=False)
    bearer_auth_token: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None

    def __post_init__(self) -> None:
        problem = url_problem(self.url)
        if problem:
            raise UsageError(f"--schema-registry-url: {shown_url(self.url)!r} {problem}")
        if self.basic_auth_user_info is not None and self.bearer_auth_token is not None:
            raise UsageError(
                "the registry's basic auth user info and bearer token are both set: give one of them"
            )
        if self.basic_auth_user_info is not None and ":" not in self.basic_auth_user_info:
            raise UsageError("the registry's basic auth user info: expected USER:PASSWORD (value hidden)")
        credentials = (
            "the registry's basic auth user info"
            if self.basic_auth_user_info is not None
            else "the registry's bearer token"
            if self.bearer_auth_token is not None
            else None
        )
        problem = credentials_problem(self.url, credentials, self.ssl_cafile is not None)
        if problem:
            raise UsageError(problem)

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "application/vnd.schemaregistry.v1+json, application/json"}
        if self.basic_auth_user_info is not None:
            token = base64.b64encode(self.basic_auth_user_info.encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        elif self.bearer_auth_token is not None:
            headers["Authorization"] = f"Bearer {self.bearer_auth_token}"
        return headers


@dataclass(frozen=True, slots=True)
class Reference:
    """A schema another one imports (Protobuf ``import "name"``), by subject and version."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class SchemaVersion:
    """One registered version of a subject: its global id, type and text."""

    subject: str
    version: int
    id: int
    schema_type: SchemaType
    schema: str
    references: tuple[Reference, ...] = ()


def shown_url(url: str) -> str:
    """``url`` as a message may quote it: user information, query and fragment replaced by
    ``***``. Text that does not parse as a URL but holds ``@`` shows only what follows it."""
    try:
        parts = urllib.parse.urlsplit(url)
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
    """Why ``url`` cannot be the registry's base URL (``None`` when it can); never quotes it."""
    try:
        parts = urllib.parse.urlsplit(url)
        _ = parts.port  # raises for a port that is not a number in range
    except ValueError:
        return "is not a URL (a bracketed address or a port that does not parse)"
    if "@" in parts.netloc or (parts.scheme not in ("http", "https") and "@" in url):
        return (
            "holds a user name or password (user:password@ in the URL), which would be shown in "
            f"logs and errors; remove it and set ${BASIC_AUTH_ENV} or --schema-registry-basic-auth-"
            "user-info-file"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be http:// or https:// followed by a host"
    if parts.query or parts.fragment:
        return "has a query or a fragment: give the base of the registry's API (paths are appended to it)"
    return None


def credentials_problem(url: str, credentials: str | None, cafile: bool) -> str | None:
    """Why the TLS or credential settings do not fit ``url`` (``None`` when they do): a CA file
    with ``http://``, or credentials over ``http://`` to a host other than loopback."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https":
        return None
    if cafile:
        return (
            f"--schema-registry-ssl-cafile is set but --schema-registry-url {shown_url(url)!r} is "
            "http://, which would ignore it; use https:// or remove --schema-registry-ssl-cafile"
        )
    if credentials and not _is_loopback(parts.hostname or ""):
        return (
            f"{credentials} is set but --schema-registry-url {shown_url(url)!r} is http:// to a host "
            "other than loopback: the credentials would cross the network in clear text; use https://"
        )
    return None


def _is_loopback(host: str) -> bool:
    name = host.strip().strip("[]").lower()
    if name in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def value_subject(topic: str, override: str | None = None) -> str:
    """The subject of a topic's values under the default (TopicNameStrategy) naming."""
    return override if override else f"{topic}-value"


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx is returned as an error, not followed: urllib would send the credentials along."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class RegistryClient:
    """A blocking client for the few GETs the jobs need (the standard library's urllib)."""

    def __init__(self, settings: RegistrySettings, timeout_s: float = TIMEOUT_S) -> None:
        self.settings = settings
        self.timeout_s = timeout_s
        context = ssl.create_default_context(cafile=settings.ssl_cafile) if settings.ssl_cafile else None
        self._opener = urllib.request.build_opener(
            _NoRedirects(), urllib.request.HTTPSHandler(context=context)
        )

    def get(self, path: str) -> Any:
        """GET ``path`` under the base URL and decode its JSON; :class:`RegistryError` otherwise."""
        url = self.settings.url.rstrip("/") + path
        shown = shown_url(url)
        request = urllib.request.Request(url, headers=self.settings.headers())
        try:
            with self._opener.open(request, timeout=self.timeout_s) as answer:
                body = answer.read(MAX_ANSWER_BYTES + 1)
        except urllib.error.HTTPError as e:
            raise RegistryError(_http_error(shown, e)) from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = e.reason if isinstance(e, urllib.error.URLError) else e
            raise RegistryError(
                f"schema registry at {shown} did not answer: {_one_line(str(reason))}"
            ) from None
        if len(body) > MAX_ANSWER_BYTES:
            raise RegistryError(f"schema registry at {shown} answered more than {MAX_ANSWER_BYTES} bytes")
        try:
            return json.loads(body)
        except (ValueError, RecursionError):
            raise RegistryError(f"schema registry at {shown} answered something that is not JSON") from None

    def versions(self, subject: str) -> list[int]:
        """The subject's version numbers, oldest first."""
        quoted = urllib.parse.quote(subject, safe="")
        found = self.get(f"/subjects/{quoted}/versions")
        if not isinstance(found, list) or not all(type(v) is int for v in found):
            raise RegistryError(f"schema registry: /subjects/{subject}/versions is not a list of versions")
        if len(found) > MAX_VERSIONS:
            raise RegistryError(
                f"schema registry: subject {subject!r} has {len(found)} versions, more than the "
                f"{MAX_VERSIONS} the job reads"
            )
        return sorted(found)

    def version(self, subject: str, version: int | Literal["latest"]) -> SchemaVersion:
        """One version of ``subject`` (``"latest"`` for the newest)."""
        quoted = urllib.parse.quote(subject, safe="")
        found = self.get(f"/subjects/{quoted}/versions/{version}")
        return _schema_version(found, subject)

    def all_versions(self, subject: str) -> list[SchemaVersion]:
        """Every version of ``subject``, oldest first; the last is the latest."""
        return [self.version(subject, v) for v in self.versions(subject)]


def _http_error(shown: str, error: urllib.error.HTTPError) -> str:
    detail = ""
    try:
        body = json.loads(error.read(64 * 1024))
        if isinstance(body, dict) and isinstance(body.get("message"), str):
            detail = f": {_one_line(body['message'])}"
    except (ValueError, OSError, RecursionError):
        pass
    if 300 <= error.code < 400:
        target = shown_url(error.headers.get("Location") or "") or "nowhere"
        return (
            f"schema registry at {shown} redirected to {_one_line(target)} ({error.code}); redirects are "
            "not followed (the credentials go to --schema-registry-url only): give the address that answers"
        )
    if error.code in (401, 403):
        return (
            f"schema registry refused the credentials ({error.code}) for {shown}; check "
            f"${BASIC_AUTH_ENV} or ${BEARER_TOKEN_ENV} (or their --schema-registry-*-file options)"
        )
    if error.code == 404:
        return f"schema registry has no {shown} (404){detail}; is the subject registered? (--value-subject)"
    return f"schema registry answered {error.code} for {shown}{detail}"


def _one_line(text: str) -> str:
    """``text`` as one printable line of at most 200 characters."""
    return re.sub(r"[^\x20-\x7e\u00a0-\u2027\u202a-\ud7ff\ue000-\ufffd]", "?", " ".join(text.split()))[:200]


def _schema_version(found: Any, subject: str) -> SchemaVersion:
    """One version of a subject from a decoded answer; :class:`RegistryError` for any other shape."""
    where = f"schema registry: subject {subject!r}"
    if not isinstance(found, dict):
        raise RegistryError(f"{where}: the version is not a JSON object")
    given = found.get("schemaType") or "AVRO"  # Confluent's API omits the type for Avro
    kinds: dict[str, SchemaType] = {"AVRO": "AVRO", "PROTOBUF": "PROTOBUF", "JSON": "JSON"}
    if not isinstance(given, str) or given not in kinds:
        raise RegistryError(f"{where}: unknown schemaType {_one_line(repr(given))[:40]}")
    version, schema_id, text = found.get("version"), found.get("id"), found.get("schema")
    if type(version) is not int or type(schema_id) is not int or not isinstance(text, str):
        raise RegistryError(f"{where}: the version lacks an integer version and id and a schema text")
    refs = found.get("references") or []
    if not isinstance(refs, list) or not all(_is_reference(r) for r in refs):
        raise RegistryError(f"{where}: the version's references are not a list of name, subject, version")
    references = tuple(Reference(r["name"], r["subject"], r["version"]) for r in refs)
    return SchemaVersion(subject, version, schema_id, kinds[given], text, references)


def _is_reference(ref: Any) -> bool:
    return (
        isinstance(ref, dict)
        and isinstance(ref.get("name"), str)
        and isinstance(ref.get("subject"), str)
        and type(ref.get("version")) is int
    )
