"""A Protobuf schema with a nested ``google.protobuf.Timestamp`` and a reference, for the tests."""

from __future__ import annotations

from typing import Any

from timesync_wire.formats.protobuf import protobuf_time_reader
from timesync_wire.schemas.protoc import MAIN_NAME, compile_proto

COMMON = 'syntax = "proto3";\npackage common;\nmessage Money { int64 cents = 1; string currency = 2; }\n'
SCHEMA = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "common/money.proto";

message Ping { int32 n = 1; }

message Payment {
  string id = 1;
  common.Money amount = 2;
  Meta meta = 3;
  message Meta {
    string source = 1;
    google.protobuf.Timestamp at = 2;
    int64 at_ms = 3;
    optional int64 maybe_ms = 4;
  }
  repeated int64 history = 4;
}
"""
REFERENCES = {"common/money.proto": COMMON}


def descriptor_set() -> bytes:
    return compile_proto(SCHEMA, REFERENCES)


def payment_class(compiled: bytes) -> Any:
    """The message class of ``shop.Payment`` (message index [1]), for writing test bodies."""
    reader = protobuf_time_reader(compiled, MAIN_NAME, (1,), ["meta", "at"], "ms")
    return reader._cls  # the reader's own class: the same descriptors


def payment(cls: Any, at_ms: int | None, at_ms_field: int = 0) -> bytes:
    msg = cls(id="p1")
    msg.amount.cents = 1250
    msg.meta.source = "pos"
    if at_ms is not None:
        msg.meta.at.seconds, msg.meta.at.nanos = divmod(at_ms, 1000)
        msg.meta.at.nanos *= 1_000_000
    msg.meta.at_ms = at_ms_field
    return bytes(msg.SerializeToString())
