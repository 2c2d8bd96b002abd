"""The Schema Registry side of the ``avro:`` / ``protobuf:`` extractors: an async client of
Confluent's REST API and the resolution of a fetched batch's schema ids before the core sees
them (see :mod:`timesync_wire` for the pure protocol and decoding)."""
