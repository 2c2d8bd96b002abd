"""Reading event time out of Schema Registry payloads (Avro, Protobuf), without I/O.

Everything here is pure: bytes and schema texts in, timestamps or reasons out. The registry
client that fetches schemas lives in :mod:`sidecar.registry`; the service resolves every schema
id of a fetched batch through it *before* the records reach the core, so the core's extractor
(:class:`sidecar.formats.extractor.SchemaTimestamp`) only ever looks schemas up in its cache.
"""
