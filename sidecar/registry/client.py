"""An async client of Confluent's Schema Registry API (``/schemas/ids/<id>``), with a cache.

Plain aiohttp: the sidecar needs two GETs (a schema by id, and a referenced subject version),
and what each answer *means* is the sidecar's own policy, so a client library would add a
dependency without removing code. Confluent's registry client (``confluent-kafka``) is
synchronous; ``python-schema-registry-client`` pulls in httpx and its own Avro and JSON schema
models for nothing we use.

Answers map to three outcomes, because they call for three different reactions:

* 404 — the registry does not know the id: :class:`SchemaNotFoundError` (cached, so asked once);
  the records written with it are invalid timestamps.
* 401 / 403 — credentials refused: :class:`RegistryRefusedError`; another try would be refused
  again, so the sidecar stops (exit 1).
* anything else that is not a schema — a connection refused or cut, a timeout, a 5xx, a body
  that is not the API's JSON — :class:`RegistryUnavailableError`: retriable, never a reason to
  dead-letter a record.

Settings are named as Confluent's clients name them: ``schema.registry.url``,
``schema.registry.basic.auth.user.info`` (``user:password``), ``schema.registry.bearer.auth.token``
and ``schema.registry.ssl.cafile``.
"""

from __future__ import annotations

import base64
import ssl
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import aiohttp

#: One request's bound: a registry that does not answer within it is unavailable this time.
REQUEST_TIMEOUT_S = 10.0


class RegistryError(Exception):
    """A registry answer that gives no schema."""


class RegistryUnavailableError(RegistryError):
    """Unreachable, timed out, 5xx or garbled: ask again later."""


class RegistryRefusedError(RegistryError):
    """401/403: the registry refuses the credentials (``schema.registry.*auth*``)."""


class SchemaNotFoundError(RegistryError):
    """404 for a schema id or a referenced subject version."""


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """A schema as the registry gives it: text, type and the texts of its references by import
    name (resolved recursively)."""

    text: str
    schema_type: str = "AVRO"
    references: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RegistrySettings:
    url: str
    basic_auth_user_info: str = ""
    bearer_auth_token: str = ""
    ssl_cafile: str = ""

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "application/vnd.schemaregistry.v1+json, application/json"}
        if self.basic_auth_user_info:
            token = base64.b64encode(self.basic_auth_user_info.encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        elif self.bearer_auth_token:
            headers["Authorization"] = f"Bearer {self.bearer_auth_token}"
        return headers

    def ssl_context(self) -> ssl.SSLContext | None:
        return ssl.create_default_context(cafile=self.ssl_cafile) if self.ssl_cafile else None


class RegistryClient:
    """Schemas by id, each fetched once (a 404 is remembered too).

    A connection is opened per schema not cached yet and closed after it: a sidecar asks its
    registry a handful of times in its life (once per schema id), so a kept session would only
    be one more thing to close on every restart path.
    """

    def __init__(self, settings: RegistrySettings) -> None:
        self.settings = settings
        self.base = settings.url.rstrip("/")
        self._ssl = settings.ssl_context()
        self._schemas: dict[int, RegisteredSchema | SchemaNotFoundError] = {}

    def _open(self) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            headers=self.settings.headers(),
            timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S),
            connector=aiohttp.TCPConnector(ssl=self._ssl or True),
        )

    async def schema(self, schema_id: int) -> RegisteredSchema:
        """The schema with this id; raises one of the :class:`RegistryError` kinds."""
        known = self._schemas.get(schema_id)
        if isinstance(known, SchemaNotFoundError):
            raise known
        if known is not None:
            return known
        try:
            async with self._open() as session:
                body = await _get(session, self.base, f"/schemas/ids/{schema_id}", f"schema id {schema_id}")
                schema = RegisteredSchema(
                    text=_text(body, f"schema id {schema_id}"),
                    schema_type=str(body.get("schemaType") or "AVRO"),
                    references=await self._references(session, body.get("references") or [], set()),
                )
        except SchemaNotFoundError as e:
            self._schemas[schema_id] = e
            raise
        self._schemas[schema_id] = schema
        return schema

    async def _references(
        self, session: aiohttp.ClientSession, refs: list[Any], seen: set[tuple[str, int]]
    ) -> dict[str, str]:
        """Import name → text for every reference, and theirs in turn."""
        out: dict[str, str] = {}
        for ref in refs:
            try:
                name, subject, version = str(ref["name"]), str(ref["subject"]), int(ref["version"])
            except (KeyError, TypeError, ValueError):
                raise RegistryUnavailableError(
                    f"the registry gave a reference without name, subject and version: {ref!r}"
                ) from None
            if (subject, version) in seen:
                continue
            seen.add((subject, version))
            what = f"reference {name} (subject {subject} version {version})"
            path = f"/subjects/{quote(subject, safe='')}/versions/{version}"
            body = await _get(session, self.base, path, what)
            out[name] = _text(body, what)
            out |= await self._references(session, body.get("references") or [], seen)
        return out


async def _get(session: aiohttp.ClientSession, base: str, path: str, what: str) -> dict[str, Any]:
    url = base + path
    try:
        async with session.get(url) as response:
            status = response.status
            if status == 200:
                body = await response.json(content_type=None)
                if not isinstance(body, dict):
                    raise RegistryUnavailableError(f"{url} answered 200 with no JSON object")
                return body
            detail = (await response.text())[:200].strip()
    except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as e:
        raise RegistryUnavailableError(f"{url}: {type(e).__name__}: {e}".rstrip(": ")) from None
    if status == 404:
        raise SchemaNotFoundError(f"the registry does not know {what} (404)")
    if status in (401, 403):
        raise RegistryRefusedError(
            f"the schema registry at {base} refused the credentials ({status}): {detail}; "
            "check schema.registry.basic.auth.user.info or schema.registry.bearer.auth.token"
        )
    raise RegistryUnavailableError(f"{url} answered {status}: {detail}")


def _text(body: dict[str, Any], what: str) -> str:
    text = body.get("schema")
    if not isinstance(text, str):
        raise RegistryUnavailableError(f"the registry's answer for {what} has no schema text")
    return text
