"""The wire format of timesync's values, below both halves (the sidecar and the Spark jobs).

Pure: no asyncio, no aiohttp, no pyspark, and no import of ``sidecar`` or ``spark_consumer``.
It will hold framing, time-value conversion, the header contract, the registry protocol, schema
compilation and the value formats (issue 33); today it holds the value formats' C plans, each
held to a pure-Python specification, not yet wired into the sidecar.
"""
