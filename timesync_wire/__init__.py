"""The wire format of timesync's values, below both halves (the sidecar and the Spark jobs).

Pure: no asyncio, no aiohttp, no pyspark, and no import of ``sidecar`` or ``spark_consumer``
(``tests/unit/test_import_graph.py``). What both halves must read alike is written here once:

* :mod:`.framing` — Confluent's framing and message indexes, every limit defined once;
* :mod:`.timevalues` — a value read at a path turned into event time in ms;
* :mod:`.headers` — the ``timesync.*`` header contract the sidecar writes and Spark reads;
* :mod:`.registry` — the Schema Registry protocol: URL rules, requests to build, answers to
  interpret (no I/O: each half brings its own transport);
* :mod:`.schemas` — schema compilation: Avro walks and references, Protobuf through protoc;
* :mod:`.formats` — the value formats (JSON, Avro, Protobuf): their time readers, C plans each
  held to a pure-Python specification.
"""
