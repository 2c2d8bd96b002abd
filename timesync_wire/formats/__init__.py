"""Value formats: how event time is read from a value of each format (JSON, Avro, Protobuf)."""
