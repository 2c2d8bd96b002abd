"""Resolve every schema id of a fetched batch before the batch reaches the core.

The core's :class:`~sidecar.formats.extractor.SchemaTimestamp` never does I/O: it reads schemas
from its cache. :class:`SchemaResolver` fills that cache from the registry for the ids a batch
needs, so that ``push`` finds each one either readable or known to be unreadable:

* a schema the registry gives is compiled into a reader (Avro: a reader schema projected to the
  path; Protobuf: descriptors compiled from the text and its references);
* an id the registry does not know (404) is cached as *unreadable* for ``missing_ttl_s``
  (``schema.registry.missing.id.ttl.ms``), then asked again: an id read before it was registered
  does not stay unknown until a restart;
* a schema that does not parse or compile, has no time at the path, or whose compiler raises
  **anything** (defense in depth beside the compilers' own bounds) is cached as unreadable, with
  the reason, for :data:`UNREADABLE_TTL_S`: its records are invalid timestamps, and their DLQ
  reason names the id and the field;
* one fetch may look up at most ``max_new`` ids and Protobuf message paths not seen before
  (``schema.registry.max.new.ids.per.fetch``): a producer writing thousands of distinct ids
  cannot hold the batch for thousands of requests. The records of the ids past the budget are
  invalid timestamps for this fetch only, with a reason saying so; a later fetch asks again;
* the new ids of a batch are asked at once, at most
  :data:`~sidecar.registry.client.MAX_CONCURRENT_REQUESTS` at a time over one session;
* a registry that cannot be reached, answers 5xx or 429, redirects or garbles is retried with
  backoff (at least what its ``Retry-After`` asked, bounded) for as long as it takes: the batch
  (and so the partitions in it) waits, health is degraded with the reason — unhealthy past
  ``schema.registry.unhealthy.after.ms`` — and nothing is dead-lettered because of it;
* refused credentials (401/403) raise :class:`~sidecar.registry.client.RegistryRefusedError`,
  which the failure table makes fatal (exit 1, one line).

Every cache is bounded (:class:`~sidecar.formats.extractor.SchemaCache`, trimmed here before
each batch on the service's clock; the client's; the compiled Protobuf files).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

from sidecar.formats.avro import SchemaError, avro_time_reader
from sidecar.formats.avro_references import standalone
from sidecar.formats.extractor import SchemaTimestamp, TimeReader, Unreadable
from sidecar.formats.protobuf import protobuf_time_reader
from sidecar.registry.client import (
    MAX_CONCURRENT_REQUESTS,
    RegisteredSchema,
    RegistryClient,
    RegistryUnavailableError,
    SchemaNotFoundError,
    SchemaUnreadableError,
)
from sidecar.registry.lru import Lru
from sidecar.registry.protoc import MAIN_NAME, compile_proto

log = logging.getLogger("timesync")

FIRST_BACKOFF_S = 0.2
MAX_BACKOFF_S = 5.0
#: How long a schema that does not compile (or has no time at the path) is believed so.
UNREADABLE_TTL_S = 300.0
#: Compiled Protobuf files kept, and their total size.
COMPILED_CAPACITY = 1_000
COMPILED_BYTES = 64 * 1024 * 1024
#: The longest reason kept from a compiler's exception.
MAX_REASON = 300
#: At most one warning about the per-fetch budget in this many seconds.
BUDGET_WARNING_EVERY_S = 60.0

Lookup = tuple[int, tuple[int, ...]]


class SchemaResolver:
    """Fills extractors' schema caches from one registry client."""

    def __init__(
        self,
        client: RegistryClient,
        waiting: Callable[[str | None], None],
        stopped: Callable[[float], Awaitable[bool]],
        *,
        max_new: int = 500,
        missing_ttl_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``waiting(reason)`` reports the registry unavailable (``None``: available again);
        ``stopped(seconds)`` sleeps up to ``seconds`` and says whether the run is stopping;
        ``max_new``: new lookups one batch may make; ``clock``: seconds, for the caches' TTLs."""
        self.client = client
        self._waiting = waiting
        self._stopped = stopped
        self.max_new = max_new
        self.missing_ttl_s = missing_ttl_s
        self.clock = clock
        self._waited = False
        self._warned_at = -BUDGET_WARNING_EVERY_S
        #: Compiled Protobuf descriptor sets by schema id (one compile per id, any message).
        self._compiled: Lru[int, bytes] = Lru(COMPILED_CAPACITY, COMPILED_BYTES, len)

    async def resolve(self, extractor: SchemaTimestamp, values: Iterable[bytes | None]) -> bool:
        """Resolve the ids ``values`` need, waiting out an unavailable registry; ``False`` if the
        run stopped meanwhile (the batch must then not be pushed). Call once per extractor and
        batch, with all of the batch's values for it: the cache is trimmed here."""
        cache = extractor.schemas
        cache.trim(self.clock())
        values = list(values)
        wanted = cache.missing(values)
        if not wanted:
            return True
        lookups = [(sid, ix) for sid, indexes in wanted.items() for ix in sorted(indexes)]
        if len(lookups) > self.max_new:
            self._over_budget(extractor, lookups[self.max_new :], len(lookups))
            wanted = _grouped(lookups[: self.max_new])
        backoff = FIRST_BACKOFF_S
        while True:
            try:
                await self._lookup_all(extractor, wanted)
            except RegistryUnavailableError as e:
                self._waited = True
                self._waiting(f"schema registry unavailable ({e}); fetched records wait for their schemas")
                if await self._stopped(max(backoff, e.retry_after_s or 0.0)):
                    return False
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                wanted = cache.missing(values)  # what the last try did resolve stays
                continue
            if self._waited:
                log.info("schema registry available again")
                self._waited = False
                self._waiting(None)
            return True

    def _over_budget(self, extractor: SchemaTimestamp, past: list[Lookup], asked: int) -> None:
        """Mark the lookups past the budget unreadable for this batch only (they expire at the
        next trim, so a later fetch asks again)."""
        reason = Unreadable(
            f"not looked up: this fetch named {asked} schema ids or message paths not seen before, "
            f"more than schema.registry.max.new.ids.per.fetch={self.max_new}; a later fetch asks again"
        )
        now = self.clock()
        for sid, ix in past:
            extractor.schemas.put(sid, reason, ix if extractor.format == "protobuf" else (), expires=now)
        if now - self._warned_at >= BUDGET_WARNING_EVERY_S:
            self._warned_at = now
            log.warning(
                "a fetch named %d schema ids or message paths not seen before; %d were not looked up "
                "(schema.registry.max.new.ids.per.fetch=%d): their records take the invalid path",
                asked,
                len(past),
                self.max_new,
            )

    async def _lookup_all(self, extractor: SchemaTimestamp, wanted: dict[int, set[tuple[int, ...]]]) -> None:
        """Resolve ``wanted`` at most MAX_CONCURRENT_REQUESTS at a time; every lookup runs to its
        end, then refused credentials win over an unavailable registry (the longest Retry-After)."""
        gate = asyncio.Semaphore(MAX_CONCURRENT_REQUESTS)

        async def one(sid: int, indexes: set[tuple[int, ...]]) -> None:
            async with gate:
                await self._resolve_one(extractor, sid, indexes)

        outcomes = await asyncio.gather(*(one(s, ix) for s, ix in wanted.items()), return_exceptions=True)
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        for error in errors:
            if not isinstance(error, RegistryUnavailableError):
                raise error  # refused credentials (fatal), or a bug: never swallowed
        if errors:
            unavailable = [e for e in errors if isinstance(e, RegistryUnavailableError)]
            longest = max(unavailable, key=lambda e: e.retry_after_s or 0.0)
            raise longest

    async def _resolve_one(self, extractor: SchemaTimestamp, sid: int, indexes: set[tuple[int, ...]]) -> None:
        cache = extractor.schemas
        try:
            schema = await self.client.schema(sid)
        except SchemaUnreadableError as e:
            ttl = self.missing_ttl_s if isinstance(e, SchemaNotFoundError) else UNREADABLE_TTL_S
            cache.put(sid, Unreadable(str(e)), expires=self.clock() + ttl)
            return
        unreadable_until = self.clock() + UNREADABLE_TTL_S
        expected = "PROTOBUF" if extractor.format == "protobuf" else "AVRO"
        if schema.schema_type.upper() != expected:
            reason = f"schema id {sid} is {schema.schema_type}, not {expected}"
            cache.put(sid, Unreadable(reason), expires=unreadable_until)
            return
        try:
            if extractor.format == "avro":
                text = standalone(schema.text, schema.references)
                cache.put(sid, avro_time_reader(text, extractor.path, extractor.unit))
                return
            compiled = await self._compile(sid, schema)
        except Exception as e:  # any compiler failure: this id is unreadable, never a crash
            cache.put(sid, Unreadable(_reason(e)), expires=unreadable_until)
            return
        for ix in indexes:
            reader: TimeReader | Unreadable
            expires: float | None = None
            try:
                reader = protobuf_time_reader(compiled, MAIN_NAME, ix, extractor.path, extractor.unit)
            except Exception as e:  # as above, for one message of the file
                reader, expires = Unreadable(_reason(e)), unreadable_until
            cache.put(sid, reader, ix, expires=expires)

    async def _compile(self, sid: int, schema: RegisteredSchema) -> bytes:
        compiled = self._compiled.get(sid)
        if compiled is None:
            compiled = await asyncio.to_thread(compile_proto, schema.text, schema.references)
            self._compiled.put(sid, compiled)
        return compiled


def _grouped(lookups: list[Lookup]) -> dict[int, set[tuple[int, ...]]]:
    out: dict[int, set[tuple[int, ...]]] = {}
    for sid, ix in lookups:
        out.setdefault(sid, set()).add(ix)
    return out


def _reason(error: Exception) -> str:
    """One line of at most MAX_REASON characters: a SchemaError's own words, else the type too."""
    text = (
        str(error)
        if isinstance(error, SchemaError)
        else f"the schema does not compile: {type(error).__name__}: {error}"
    )
    text = " ".join(text.split())
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"
