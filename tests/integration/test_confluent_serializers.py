"""Values written by Confluent's own client: confluent-kafka's ``AvroSerializer`` and
``ProtobufSerializer`` registering their schemas in the registry, librdkafka's producer sending.

The other registry tests frame values with the project's own encoder. These take the reference
writer of Confluent's wire format, as most producers in production run it, with its own choices:
it registers the schema itself under ``<topic>-value``; it writes Avro logical types from
``datetime`` values; it registers a Protobuf schema — and each file the schema imports, under the
file's name — as a *serialized* ``FileDescriptorProto`` in base64, which Apicurio keeps as it was
sent; and it writes the message indexes itself. Either way the output must be the k-way merge by
the value's field, and Spark's ``--value-format protobuf`` must decode from the same registration.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from sidecar.kafka.admin import TopicSpec
from spark_consumer.protobuf_rows import FramedDecoder
from spark_consumer.schema_registry import RegistryClient, checked_settings
from spark_consumer.value_decoders import plan_values
from spark_consumer.value_formats import ProtobufValues
from testkit import kafka_io, ordered

from .conftest import StartSidecar
from .test_schema_registry import DAY, events, k_way

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(240)]

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {
            "name": "meta",
            "type": {
                "type": "record",
                "name": "Meta",
                "fields": [{"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}}],
            },
        },
    ],
}


def payment_class() -> Any:
    """``shop.Payment`` — the second message of ``shop/payment.proto``, which imports
    ``common/money.proto`` and ``google/protobuf/timestamp.proto`` — in a pool of its own, as
    ``protoc --python_out`` would have generated it."""
    pool = descriptor_pool.DescriptorPool()
    well_known = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(well_known)
    pool.Add(well_known)
    money = descriptor_pb2.FileDescriptorProto(name="common/money.proto", package="common", syntax="proto3")
    money.message_type.add(name="Money").field.add(name="cents", number=1, type=3, label=1)
    pool.Add(money)
    payment = descriptor_pb2.FileDescriptorProto(
        name="shop/payment.proto",
        package="shop",
        syntax="proto3",
        dependency=["google/protobuf/timestamp.proto", "common/money.proto"],
    )
    payment.message_type.add(name="Ping").field.add(name="n", number=1, type=5, label=1)
    message = payment.message_type.add(name="Payment")
    message.field.add(name="id", number=1, type=9, label=1)
    message.field.add(name="amount", number=2, type=11, label=1, type_name=".common.Money")
    message.field.add(name="meta", number=3, type=11, label=1, type_name=".shop.Payment.Meta")
    meta = message.nested_type.add(name="Meta")
    meta.field.add(name="at", number=1, type=11, label=1, type_name=".google.protobuf.Timestamp")
    pool.Add(payment)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Payment"))


def produce(bootstrap: str, topic: str, rows: list[tuple[int, bytes]], create_time: int) -> None:
    """``rows`` of (partition, value) through librdkafka, all with the same CreateTime."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for partition, value in rows:
        producer.produce(
            topic, value=value, key=b"k%d" % partition, partition=partition, timestamp=create_time
        )
    assert producer.flush(30) == 0, "librdkafka could not deliver every record"


async def merged_by_the_field(
    bootstrap: str,
    sidecar: StartSidecar,
    src: str,
    out: str,
    serialize: Callable[[int], bytes],
    extractor: str,
    registry: str,
) -> None:
    """Two partitions of values written by ``serialize(event time)``: the sidecar's output is
    their k-way merge by ``extractor``'s field (the Kafka timestamps are all the same)."""
    await kafka_io.create_topics(bootstrap, [TopicSpec(src, 2)])
    now = int(datetime.datetime.now(datetime.UTC).timestamp() * 1000)
    per_partition = {p: [(ts, serialize(ts)) for ts in events(7, p, 100, now - DAY)] for p in (0, 1)}
    rows = [(p, value) for p, pairs in per_partition.items() for _, value in pairs]
    await asyncio.to_thread(produce, bootstrap, src, rows, now)

    await sidecar([src], out, timestamp_extractor=extractor, schema_registry_url=registry)
    expected = k_way(per_partition)
    written = ordered.data(await kafka_io.read_topics(bootstrap, [out], expected=len(expected), timeout_s=90))
    assert [(o.timestamp, o.source_partition, o.value) for o in written] == expected


async def test_avro_from_confluents_serializer_merges_by_a_nested_timestamp_micros(
    bootstrap: str, schema_registry: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    src = topic_name("orders")
    serializer = AvroSerializer(SchemaRegistryClient({"url": schema_registry}), json.dumps(ORDER))
    context = SerializationContext(src, MessageField.VALUE)

    def serialize(ts: int) -> bytes:
        at = datetime.datetime.fromtimestamp(ts / 1000, datetime.UTC)
        return bytes(serializer({"id": f"o{ts}", "meta": {"at": at}}, context))

    await merged_by_the_field(
        bootstrap, sidecar, src, topic_name("out"), serialize, "avro:meta.at", schema_registry
    )


async def test_protobuf_from_confluents_serializer_registered_as_descriptors_merges_by_its_timestamp(
    bootstrap: str, schema_registry: str, topic_name: Callable[[str], str], sidecar: StartSidecar
) -> None:
    src = topic_name("payments")
    payment = payment_class()
    client = SchemaRegistryClient({"url": schema_registry})
    serializer = ProtobufSerializer(payment, client, {"use.deprecated.format": False})
    context = SerializationContext(src, MessageField.VALUE)

    def serialize(ts: int) -> bytes:
        msg = payment(id=f"p{ts}")
        msg.amount.cents = ts % 1000
        msg.meta.at.seconds, millis = divmod(ts, 1000)
        msg.meta.at.nanos = millis * 1_000_000
        return bytes(serializer(msg, context))

    await merged_by_the_field(
        bootstrap, sidecar, src, topic_name("out"), serialize, "protobuf:meta.at", schema_registry
    )
    # What the registry holds is the serializer's own registration: the schema and its import as
    # base64 descriptors (the path the project's own encoder never takes).
    latest = client.get_latest_version(f"{src}-value")
    assert [ref.name for ref in latest.schema.references] == ["common/money.proto"]
    assert ";" not in latest.schema.schema_str
    # And Spark's `--value-format protobuf --value-message shop.Payment` decodes the serializer's
    # values from that same registration (Payment is the file's second message: indexes [1]).
    registry = RegistryClient(checked_settings(schema_registry))
    values = plan_values("protobuf", registry, f"{src}-value", "shop.Payment")
    assert isinstance(values, ProtobufValues)
    assert values.message_indexes == (1,)
    decode = FramedDecoder(values.descriptor_set, values.file_name, values.schema_ids, values.message_indexes)
    at = 1_700_000_000_123
    assert decode(serialize(at)) == {
        "id": f"p{at}",
        "amount": {"cents": at % 1000},
        "meta": {"at": datetime.datetime.fromtimestamp(at / 1000, datetime.UTC)},
    }
