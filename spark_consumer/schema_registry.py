"""Read a subject's schemas from a Schema Registry, once, before Spark starts.

The jobs decode Avro and Protobuf values with the schemas the registry holds for the ordered
topic's subject (``<topic>-value`` unless ``--value-subject`` says otherwise). They are fetched
at plan time, through Confluent's REST API (``/subjects/<s>/versions``, ``/versions/<v>``),
which Confluent's registry serves at its root and Apicurio under ``/apis/ccompat/v7``: the URL
given is that base. Every version is read, not only the latest, because records written under
an older version carry its id and are decoded with it (see :mod:`spark_consumer.value_formats`).

The settings are named after the sidecar's (and Confluent's clients'): ``schema.registry.url``,
``schema.registry.basic.auth.user.info`` (``USER:PASSWORD``), ``schema.registry.bearer.auth.token``
and ``schema.registry.ssl.cafile``. Secrets never appear in an error or a ``repr``; a URL that
carries ``user:password@`` is shown without it.

Anything that stops the fetch (no answer, a refusal, an unknown subject, a body that is not the
API's JSON) is a :class:`RegistryError`: one line, raised before Spark starts, exit status 2 like
every other mistake the CLI can see up front.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Literal

from spark_consumer.options import UsageError

SchemaType = Literal["AVRO", "PROTOBUF", "JSON"]
TIMEOUT_S = 10.0


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
        parsed = urllib.parse.urlsplit(self.url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise UsageError(f"--schema-registry-url: {shown_url(self.url)!r} is not an http(s) URL")
        if self.basic_auth_user_info is not None and self.bearer_auth_token is not None:
            raise UsageError(
                "--schema-registry-basic-auth-user-info and --schema-registry-bearer-auth-token: "
                "give one of them, not both"
            )
        if self.basic_auth_user_info is not None and ":" not in self.basic_auth_user_info:
            raise UsageError("--schema-registry-basic-auth-user-info: expected USER:PASSWORD (value hidden)")

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
    """``url`` without any ``user:password@`` part, for messages."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def value_subject(topic: str, override: str | None = None) -> str:
    """The subject of a topic's values under the default (TopicNameStrategy) naming."""
    return override if override else f"{topic}-value"


class RegistryClient:
    """A blocking client for the few GETs the jobs need (the standard library's urllib)."""

    def __init__(self, settings: RegistrySettings, timeout_s: float = TIMEOUT_S) -> None:
        self.settings = settings
        self.timeout_s = timeout_s
        self._context = (
            ssl.create_default_context(cafile=settings.ssl_cafile) if settings.ssl_cafile else None
        )

    def get(self, path: str) -> Any:
        """GET ``path`` under the base URL and decode its JSON; :class:`RegistryError` otherwise."""
        url = self.settings.url.rstrip("/") + path
        shown = shown_url(url)
        request = urllib.request.Request(url, headers=self.settings.headers())
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=self._context) as answer:
                body = answer.read()
        except urllib.error.HTTPError as e:
            raise RegistryError(_http_error(shown, e)) from None
        except (urllib.error.URLError, OSError) as e:
            reason = e.reason if isinstance(e, urllib.error.URLError) else e
            raise RegistryError(f"schema registry at {shown} did not answer: {reason}") from None
        try:
            return json.loads(body)
        except ValueError:
            raise RegistryError(f"schema registry at {shown} answered something that is not JSON") from None

    def versions(self, subject: str) -> list[int]:
        """The subject's version numbers, oldest first."""
        quoted = urllib.parse.quote(subject, safe="")
        found = self.get(f"/subjects/{quoted}/versions")
        if not isinstance(found, list) or not all(isinstance(v, int) for v in found):
            raise RegistryError(f"schema registry: /subjects/{subject}/versions is not a list of versions")
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
        body = json.loads(error.read())
        if isinstance(body, dict) and isinstance(body.get("message"), str):
            detail = f": {body['message']}"
    except (ValueError, OSError):
        pass
    if error.code in (401, 403):
        return (
            f"schema registry refused the credentials ({error.code}) for {shown}; check "
            "--schema-registry-basic-auth-user-info or --schema-registry-bearer-auth-token"
        )
    if error.code == 404:
        return f"schema registry has no {shown} (404){detail}; is the subject registered? (--value-subject)"
    return f"schema registry answered {error.code} for {shown}{detail}"


def _schema_version(found: Any, subject: str) -> SchemaVersion:
    where = f"schema registry: subject {subject!r}"
    if not isinstance(found, dict):
        raise RegistryError(f"{where}: the version is not a JSON object")
    try:
        given = found.get("schemaType") or "AVRO"  # Confluent's API omits the type for Avro
        kinds: dict[str, SchemaType] = {"AVRO": "AVRO", "PROTOBUF": "PROTOBUF", "JSON": "JSON"}
        if given not in kinds:
            raise RegistryError(f"{where}: unknown schemaType {given!r}")
        kind = kinds[given]
        references = tuple(
            Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
            for r in found.get("references") or ()
        )
        return SchemaVersion(
            subject, int(found["version"]), int(found["id"]), kind, str(found["schema"]), references
        )
    except (KeyError, TypeError, ValueError) as e:
        raise RegistryError(f"{where}: the version lacks {e}") from None
