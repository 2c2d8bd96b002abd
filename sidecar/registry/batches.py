"""The one call the input feed makes before it pushes a fetched batch to the tasks.

:func:`batch_schemas` gives ``None`` unless ``timestamp.extractor`` is ``avro:`` or
``protobuf:``, so every other configuration pays nothing. Otherwise :meth:`BatchSchemas.ready`
resolves, for each task that owns fetched records, the schema ids those records need into that
task's extractor (:mod:`sidecar.registry.resolver`), and says whether the batch may be pushed.

One :class:`BatchSchemas` lives for one start of the pipeline and holds the registry client's
session: :meth:`BatchSchemas.close` ends it on every way a start ends (stop, restart, failure),
and never raises.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sidecar.config import FOREVER_MS
from sidecar.formats.extractor import SchemaTimestamp
from sidecar.registry.client import RegistryClient, RegistrySettings

if TYPE_CHECKING:
    from sidecar.config import SidecarConfig
    from sidecar.service.context import StartContext
    from sidecar.service.tasks import TaskRegistry


def registry_settings(config: SidecarConfig) -> RegistrySettings:
    return RegistrySettings(
        url=config.schema_registry_url,
        basic_auth_user_info=config.schema_registry_basic_auth_user_info.get_secret_value(),
        bearer_auth_token=config.schema_registry_bearer_auth_token.get_secret_value(),
        ssl_cafile=config.schema_registry_ssl_cafile,
    )


class BatchSchemas:
    """Resolves the schema ids of fetched batches for the tasks that will read them."""

    def __init__(self, ctx: StartContext) -> None:
        # fastavro and protobuf load here, not when the feed's module does: other extractors
        # never pay for them.
        from sidecar.registry.resolver import SchemaResolver

        config = ctx.config
        self.control = ctx.control
        self.health = ctx.health
        missing_ttl_s = config.schema_registry_missing_id_ttl_ms / 1000
        self.client = RegistryClient(registry_settings(config), missing_ttl_s=missing_ttl_s)
        unhealthy_ms = config.schema_registry_unhealthy_after_ms
        self.unhealthy_after_s = None if unhealthy_ms >= FOREVER_MS else unhealthy_ms / 1000
        ctx.metrics.watch_registry(ctx.health.waiting_seconds, self.unhealthy_after_s)
        self.resolver = SchemaResolver(
            self.client,
            self._waiting,
            self._stopped,
            max_new=config.schema_registry_max_new_ids_per_fetch,
            missing_ttl_s=missing_ttl_s,
        )

    def _waiting(self, reason: str | None) -> None:
        self.health.waiting_for(reason, self.unhealthy_after_s)

    async def _stopped(self, seconds: float) -> bool:
        if self.control.running:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.control.changed.wait(), seconds)
        return not self.control.running

    async def ready(self, fetched: Mapping[Any, Sequence[Any]], tasks: TaskRegistry) -> bool:
        """Resolve what ``fetched`` needs; ``False`` if the run stopped while the registry was
        away (then nothing of the batch may be pushed). Each task's extractor is resolved once
        for all of its partitions' records: its cache is trimmed only between batches."""
        wanted: dict[int, tuple[SchemaTimestamp, list[bytes | None]]] = {}
        for tp, records in fetched.items():
            run = tasks.owner(tp)
            if run is None or not records:
                continue
            extractor = run.task.config.extractor
            if isinstance(extractor, SchemaTimestamp):
                wanted.setdefault(id(extractor), (extractor, []))[1].extend(r.value for r in records)
        for extractor, values in wanted.values():
            if not await self.resolver.resolve(extractor, values):
                return False
        return True

    async def close(self) -> None:
        """End the registry session and the wait this start reported; never raises."""
        self.health.waiting_for(None)
        await self.client.close()


def batch_schemas(ctx: StartContext) -> BatchSchemas | None:
    """A :class:`BatchSchemas` when the extractor reads registry payloads, else ``None``."""
    if not ctx.config.timestamp_extractor.startswith(("avro:", "protobuf:")):
        return None
    return BatchSchemas(ctx)
