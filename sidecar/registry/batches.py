"""The one call the input feed makes before it pushes a fetched batch to the tasks.

:func:`batch_schemas` gives ``None`` unless ``timestamp.extractor`` is ``avro:`` or
``protobuf:``, so every other configuration pays nothing. Otherwise :meth:`BatchSchemas.ready`
resolves, for each task that owns fetched records, the schema ids those records need into that
task's extractor (:mod:`sidecar.registry.resolver`), and says whether the batch may be pushed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

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

        self.control = ctx.control
        client = RegistryClient(registry_settings(ctx.config))
        self.resolver = SchemaResolver(client, ctx.health.waiting_for, self._stopped)

    async def _stopped(self, seconds: float) -> bool:
        if self.control.running:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.control.changed.wait(), seconds)
        return not self.control.running

    async def ready(self, fetched: Mapping[Any, Sequence[Any]], tasks: TaskRegistry) -> bool:
        """Resolve what ``fetched`` needs; ``False`` if the run stopped while the registry was
        away (then nothing of the batch may be pushed)."""
        for tp, records in fetched.items():
            run = tasks.owner(tp)
            if run is None or not records:
                continue
            extractor = run.task.config.extractor
            if isinstance(extractor, SchemaTimestamp) and not await self.resolver.resolve(
                extractor, (r.value for r in records)
            ):
                return False
        return True


def batch_schemas(ctx: StartContext) -> BatchSchemas | None:
    """A :class:`BatchSchemas` when the extractor reads registry payloads, else ``None``."""
    if not ctx.config.timestamp_extractor.startswith(("avro:", "protobuf:")):
        return None
    return BatchSchemas(ctx)
