"""An async client of Confluent's Schema Registry API (``/schemas/ids/<id>``), bounded everywhere.

Plain aiohttp: the sidecar needs two GETs (a schema by id, and a referenced subject version),
and what each answer *means* is the sidecar's own policy, so a client library would add a
dependency without removing code. Confluent's registry client (``confluent-kafka``) is
synchronous; ``python-schema-registry-client`` pulls in httpx and its own Avro and JSON schema
models for nothing we use.

The registry's answers are bytes we do not control, so what they mean is decided by
:mod:`sidecar.registry.answers` (pure, fuzzed); this module does the I/O, within bounds:

* **one keep-alive session** per client, at most :data:`MAX_CONCURRENT_REQUESTS` connections
  (the resolver asks for a batch's new ids at once, not one after another on new connections);
  :meth:`RegistryClient.close` ends it, and never raises (cleanup never kills the process);
* each answer is read up to :data:`~sidecar.registry.answers.MAX_ANSWER_BYTES`, undecompressed
  (``Accept-Encoding: identity``: no decompression bomb), within :data:`REQUEST_TIMEOUT_S`;
* **redirects are not followed**: the credentials go to the configured origin and nowhere else
  (a 3xx is an unavailable registry whose reason says where it pointed);
* **caches are bounded**: schemas by id (least recently used beyond ``capacity``), and ids the
  registry does not know (404) for ``missing_ttl_s`` only — as a reason string, not an exception
  with its traceback — so an id read before it was registered is asked again soon.

Answers map to the outcomes of :mod:`~sidecar.registry.answers`: a schema; unknown or unusable
(:class:`SchemaUnreadableError`, cached for a while: its records are invalid timestamps); refused
credentials (:class:`RegistryRefusedError`: fatal); anything else unavailable
(:class:`RegistryUnavailableError`, with the ``Retry-After`` a 429 or 503 gave, bounded).

Settings are named as Confluent's clients name them: ``schema.registry.url``,
``schema.registry.basic.auth.user.info`` (``user:password``), ``schema.registry.bearer.auth.token``
and ``schema.registry.ssl.cafile``; the URL rules (no credentials in it, none over plain http
off loopback) are checked at start (:mod:`sidecar.config.registry_url`).
"""

from __future__ import annotations

import base64
import contextlib
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp

from sidecar.config.registry_url import shown_url
from sidecar.registry.answers import (
    MAX_ANSWER_BYTES,
    MAX_REFERENCES,
    Answer,
    RegisteredSchema,
    RegistryError,
    RegistryRefusedError,
    RegistryUnavailableError,
    SchemaNotFoundError,
    SchemaUnreadableError,
    interpret,
    reference_list,
    schema_text,
)
from sidecar.registry.lru import Lru

__all__ = [
    "RegisteredSchema",
    "RegistryClient",
    "RegistryError",
    "RegistryRefusedError",
    "RegistrySettings",
    "RegistryUnavailableError",
    "SchemaNotFoundError",
    "SchemaUnreadableError",
]

#: One request's bound: a registry that does not answer within it is unavailable this time.
REQUEST_TIMEOUT_S = 10.0
#: Connections (and so requests in flight) to the registry at once.
MAX_CONCURRENT_REQUESTS = 8
#: Schemas (and referenced texts) kept by id, and their total size, before the least recently
#: used go; each answer is at most MAX_ANSWER_BYTES, so the size bound is the one that binds.
CACHE_CAPACITY = 10_000
CACHE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class RegistrySettings:
    url: str
    basic_auth_user_info: str = ""
    bearer_auth_token: str = ""
    ssl_cafile: str = ""

    def __repr__(self) -> str:  # never the credentials
        return f"RegistrySettings(url={shown_url(self.url)!r})"

    def headers(self) -> dict[str, str]:
        headers = {
            "Accept": "application/vnd.schemaregistry.v1+json, application/json",
            "Accept-Encoding": "identity",  # the size bound is on what is read: no decompression
        }
        if self.basic_auth_user_info:
            token = base64.b64encode(self.basic_auth_user_info.encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        elif self.bearer_auth_token:
            headers["Authorization"] = f"Bearer {self.bearer_auth_token}"
        return headers

    def ssl_context(self) -> ssl.SSLContext | None:
        return ssl.create_default_context(cafile=self.ssl_cafile) if self.ssl_cafile else None


class RegistryClient:
    """Schemas by id over one kept-alive session, with bounded caches (see the module)."""

    def __init__(
        self,
        settings: RegistrySettings,
        *,
        missing_ttl_s: float = 10.0,
        capacity: int = CACHE_CAPACITY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.base = settings.url.rstrip("/")
        self.shown = shown_url(self.base)
        self.missing_ttl_s = missing_ttl_s
        self.clock = clock
        self._ssl = settings.ssl_context()
        #: Never repeated in a reason, should the registry echo them.
        self._secrets = _secrets(settings)
        self._session: aiohttp.ClientSession | None = None
        self._closed = False
        self._schemas: Lru[int, RegisteredSchema] = Lru(capacity, CACHE_BYTES, _weight)
        #: Referenced subject versions: (subject, version) → (text, its own references).
        self._texts: Lru[tuple[str, int], tuple[str, tuple[tuple[str, str, int], ...]]] = Lru(
            capacity, CACHE_BYTES, lambda t: len(t[0])
        )
        #: Ids the registry did not know: id → (reason, until when it is believed).
        self._missing: Lru[int, tuple[str, float]] = Lru(capacity, capacity * 512, lambda m: len(m[0]))
        #: Requests sent (for tests and /status: the caches work when this stays small).
        self.requests = 0

    def _open(self) -> aiohttp.ClientSession:
        if self._closed:
            raise RegistryUnavailableError("the registry client is closed (the sidecar is stopping)")
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers=self.settings.headers(),
                timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S),
                connector=aiohttp.TCPConnector(
                    ssl=self._ssl or True,
                    limit=MAX_CONCURRENT_REQUESTS,
                    limit_per_host=MAX_CONCURRENT_REQUESTS,
                ),
                auto_decompress=False,
                trust_env=False,  # no proxy from the environment: the credentials go where configured
            )
        return self._session

    async def close(self) -> None:
        """End the session; never raises (cleanup never kills the process). Later calls to
        :meth:`schema` answer unavailable."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            with contextlib.suppress(Exception):  # closing must not fail the stop or restart
                await session.close()

    async def schema(self, schema_id: int) -> RegisteredSchema:
        """The schema with this id; raises one of the :class:`RegistryError` kinds."""
        known = self._schemas.get(schema_id)
        if known is not None:
            return known
        missing = self._missing.get(schema_id)
        if missing is not None:
            if self.clock() < missing[1]:
                raise SchemaNotFoundError(missing[0])
            self._missing.pop(schema_id)
        what = f"schema id {schema_id}"
        try:
            body = await self._get(f"/schemas/ids/{schema_id}", what)
            text, kind = schema_text(body, what)
            references = await self._references(reference_list(body, what))
        except SchemaNotFoundError as e:
            self._missing.put(schema_id, (str(e), self.clock() + self.missing_ttl_s))
            raise
        schema = RegisteredSchema(text=text, schema_type=kind, references=references)
        self._schemas.put(schema_id, schema)
        return schema

    async def _references(self, refs: tuple[tuple[str, str, int], ...]) -> dict[str, str]:
        """Import name → text for every reference, and theirs in turn: a worklist, not recursion,
        and at most MAX_REFERENCES subject versions in all (a cycle is followed once)."""
        out: dict[str, str] = {}
        seen: set[tuple[str, int]] = set()
        pending = list(refs)
        while pending:
            name, subject, version = pending.pop()
            if (subject, version) in seen:
                continue
            seen.add((subject, version))
            if len(seen) > MAX_REFERENCES:
                raise SchemaUnreadableError(f"the schema has more than {MAX_REFERENCES} references")
            what = f"reference {name} (subject {subject} version {version})"
            cached = self._texts.get((subject, version))
            if cached is None:
                body = await self._get(f"/subjects/{quote(subject, safe='')}/versions/{version}", what)
                cached = (schema_text(body, what)[0], reference_list(body, what))
                self._texts.put((subject, version), cached)
            out[name] = cached[0]
            pending.extend(cached[1])
        return out

    async def _get(self, path: str, what: str) -> Any:
        """GET ``path`` and interpret the answer: the decoded JSON of a 200, else a RegistryError."""
        session = self._open()
        self.requests += 1
        try:
            async with session.get(self.base + path, allow_redirects=False) as response:
                body, complete = await _read(response)
                answer = Answer(
                    response.status,
                    body,
                    complete,
                    response.headers.get("Retry-After"),
                    response.headers.get("Location"),
                )
        except Exception as e:  # whatever the transport raises: unavailable, not a crash
            reason = " ".join(f"{type(e).__name__}: {e}".split())[:200].rstrip(": ")
            raise RegistryUnavailableError(f"{self.shown}: {reason}".replace(self.base, self.shown)) from None
        return interpret(answer, what, self.shown, time.time(), self._secrets)


def _weight(schema: RegisteredSchema) -> int:
    return len(schema.text) + sum(map(len, schema.references.values()))


def _secrets(settings: RegistrySettings) -> tuple[str, ...]:
    found = [settings.bearer_auth_token, settings.basic_auth_user_info]
    if settings.basic_auth_user_info:
        found.append(settings.basic_auth_user_info.partition(":")[2])
        found.append(settings.headers()["Authorization"].removeprefix("Basic "))
    return tuple(s for s in found if len(s) >= 4)


async def _read(response: aiohttp.ClientResponse) -> tuple[bytes, bool]:
    """The body, up to MAX_ANSWER_BYTES; and whether it was read whole."""
    if response.content_length is not None and response.content_length > MAX_ANSWER_BYTES:
        return b"", False
    data = bytearray()
    async for chunk in response.content.iter_chunked(64 * 1024):
        data += chunk
        if len(data) > MAX_ANSWER_BYTES:
            return bytes(data[:MAX_ANSWER_BYTES]), False
    return bytes(data), True
