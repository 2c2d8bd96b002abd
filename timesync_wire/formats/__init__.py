"""Value formats: how event time is read from a value of each format (JSON, Avro, Protobuf).

The plans, each a pure-Python specification with a C twin held to it: :mod:`.avro_plan` (a
path in an Avro body, skipped to by a plan compiled from the writer schema), :mod:`.json_scan`
(a path in a JSON document, found without building objects) and :mod:`.protobuf_plan` (a path
in a Protobuf body, walked from descriptors).
"""
