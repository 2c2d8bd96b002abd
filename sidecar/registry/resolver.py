"""Resolve every schema id of a fetched batch before the batch reaches the core.

The core's :class:`~sidecar.formats.extractor.SchemaTimestamp` never does I/O: it reads schemas
from its cache. :class:`SchemaResolver` fills that cache from the registry for the ids a batch
needs, so that ``push`` finds each one either readable or known to be unreadable:

* a schema the registry gives is compiled into a reader (Avro: a reader schema projected to the
  path; Protobuf: descriptors compiled from the text and its references);
* an id the registry does not know (404), a schema that does not parse or compile, or one with no
  time at the path is cached as *unreadable* with the reason: its records are invalid
  timestamps, and their DLQ reason names the id and the field;
* a registry that cannot be reached or answers 5xx is retried with backoff for as long as it
  takes: the batch (and so the partitions in it) waits, health is degraded with the reason (shown
  by ``/healthz`` and ``/status``), and nothing is dead-lettered because of it;
* refused credentials (401/403) raise :class:`~sidecar.registry.client.RegistryRefusedError`,
  which the failure table makes fatal (exit 1, one line).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from sidecar.formats.avro import SchemaError, avro_time_reader
from sidecar.formats.avro_references import standalone
from sidecar.formats.extractor import SchemaTimestamp, Unreadable
from sidecar.formats.protobuf import protobuf_time_reader
from sidecar.registry.client import (
    RegisteredSchema,
    RegistryClient,
    RegistryUnavailableError,
    SchemaNotFoundError,
)
from sidecar.registry.protoc import MAIN_NAME, compile_proto

log = logging.getLogger("timesync")

FIRST_BACKOFF_S = 0.2
MAX_BACKOFF_S = 5.0


class SchemaResolver:
    """Fills extractors' schema caches from one registry client."""

    def __init__(
        self,
        client: RegistryClient,
        waiting: Callable[[str | None], None],
        stopped: Callable[[float], Awaitable[bool]],
    ) -> None:
        """``waiting(reason)`` reports the registry unavailable (``None``: available again);
        ``stopped(seconds)`` sleeps up to ``seconds`` and says whether the run is stopping."""
        self.client = client
        self._waiting = waiting
        self._stopped = stopped
        #: Compiled Protobuf descriptor sets by schema id (one compile per id, any message).
        self._compiled: dict[int, bytes] = {}

    async def resolve(self, extractor: SchemaTimestamp, values: Iterable[bytes | None]) -> bool:
        """Resolve the ids ``values`` need, waiting out an unavailable registry; ``False`` if the
        run stopped meanwhile (the batch must then not be pushed)."""
        values = list(values)
        wanted = extractor.schemas.missing(values)
        if not wanted:
            return True
        backoff = FIRST_BACKOFF_S
        while True:
            try:
                for sid, indexes in sorted(wanted.items()):
                    await self._resolve_one(extractor, sid, indexes)
            except RegistryUnavailableError as e:
                self._waiting(f"schema registry unavailable ({e}); fetched records wait for their schemas")
                if await self._stopped(backoff):
                    return False
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                wanted = extractor.schemas.missing(values)  # what the last try did resolve stays
                continue
            if backoff != FIRST_BACKOFF_S:
                log.info("schema registry available again")
                self._waiting(None)
            return True

    async def _resolve_one(self, extractor: SchemaTimestamp, sid: int, indexes: set[tuple[int, ...]]) -> None:
        cache = extractor.schemas
        try:
            schema = await self.client.schema(sid)
        except SchemaNotFoundError as e:
            cache.put(sid, Unreadable(str(e)))
            return
        expected = "PROTOBUF" if extractor.format == "protobuf" else "AVRO"
        if schema.schema_type.upper() != expected:
            cache.put(sid, Unreadable(f"schema id {sid} is {schema.schema_type}, not {expected}"))
            return
        if extractor.format == "avro":
            try:
                text = standalone(schema.text, schema.references)
                cache.put(sid, avro_time_reader(text, extractor.path, extractor.unit))
            except SchemaError as e:
                cache.put(sid, Unreadable(str(e)))
            return
        try:
            compiled = await self._compile(sid, schema)
        except SchemaError as e:
            cache.put(sid, Unreadable(str(e)))
            return
        for ix in indexes:
            try:
                reader = protobuf_time_reader(compiled, MAIN_NAME, ix, extractor.path, extractor.unit)
            except SchemaError as e:
                cache.put(sid, Unreadable(str(e)), ix)
            else:
                cache.put(sid, reader, ix)

    async def _compile(self, sid: int, schema: RegisteredSchema) -> bytes:
        compiled = self._compiled.get(sid)
        if compiled is None:
            compiled = await asyncio.to_thread(compile_proto, schema.text, schema.references)
            self._compiled[sid] = compiled
        return compiled
