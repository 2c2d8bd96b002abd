"""Kafka client quotas (KIP-546's AlterClientQuotas), which aiokafka's admin client lacks.

The slow-output test throttles the sidecar's producer with a ``producer_byte_rate`` quota on its
client id: the broker then delays its produce responses (and mutes the connection) as it would
for a real, overloaded output, while fetches stay unthrottled. aiokafka 0.14 has the request
machinery but no AlterClientQuotas request, so this module declares version 0 of it (Kafka 4.x
accepts versions 0-1) and sends it through the admin client's connection.
"""

from __future__ import annotations

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import Array, Boolean, Float64, Int16, Int32, Schema, String


class AlterClientQuotasResponse_v0(Response):
    API_KEY = 49
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "entries",
            Array(
                ("error_code", Int16),
                ("error_message", String("utf-8")),
                ("entity", Array(("entity_type", String("utf-8")), ("entity_name", String("utf-8")))),
            ),
        ),
    )


class AlterClientQuotasRequest_v0(RequestStruct):
    API_KEY = 49
    API_VERSION = 0
    RESPONSE_TYPE = AlterClientQuotasResponse_v0
    SCHEMA = Schema(
        (
            "entries",
            Array(
                ("entity", Array(("entity_type", String("utf-8")), ("entity_name", String("utf-8")))),
                ("ops", Array(("key", String("utf-8")), ("value", Float64), ("remove", Boolean))),
            ),
        ),
        ("validate_only", Boolean),
    )


class AlterClientQuotasRequest(Request[AlterClientQuotasRequest_v0]):
    API_KEY = 49

    def __init__(self, client_id: str, key: str, value: float | None) -> None:
        self._entries = [([("client-id", client_id)], [(key, value or 0.0, value is None)])]

    def build(self, request_struct_class: type[AlterClientQuotasRequest_v0]) -> AlterClientQuotasRequest_v0:
        return request_struct_class(self._entries, False)


async def set_client_quota(bootstrap: str, client_id: str, key: str, value: float | None) -> None:
    """Set quota ``key`` (e.g. ``producer_byte_rate``) of ``client_id``; ``None`` removes it."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        response = await admin._send_request(AlterClientQuotasRequest(client_id, key, value))
    finally:
        await admin.close()
    for error_code, error_message, entity in response.entries:
        if error_code:
            raise RuntimeError(
                f"AlterClientQuotas {key}={value} for {entity}: error {error_code} {error_message}"
            )
