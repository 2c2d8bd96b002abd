"""The PySpark side of timesync: join, aggregate and suppress on the ordered topic.

``session`` builds the SparkSession (Kafka connector jars, Python workers, RocksDB state),
``source`` reads the ordered topic (headers → columns, heartbeats → watermark, deduplication),
``jobs`` holds the three jobs (each with its command line, listed in ``jobs.registry``),
``sinks`` writes results, ``metrics`` reports what was dropped, ``cli`` is ``timesync-spark``
with the options every job shares in ``common_options``.
"""
