"""The core's timestamp extractors over the value formats, without I/O.

Everything here is pure: records in, event times or reasons out. ``timestamp.extractor`` is
turned into one of these by the config layer (:mod:`sidecar.config.extractor`), through the table
of value formats (:data:`timesync_wire.formats.FORMATS`): :mod:`.plain` for a format read as it is
(JSON), :mod:`.framed` for a registry format (Avro, Protobuf), whose schemas the service resolves
through the registry (:mod:`sidecar.registry`) *before* the records reach the core, so the
extractor only ever looks them up in its cache (:mod:`.schema_cache`).
"""
