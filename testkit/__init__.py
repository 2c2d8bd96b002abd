"""Helpers the tests and the benchmark share (workloads, Kafka I/O, the sidecar as a process,
the local broker, the ordering checks). Part of the checkout, not of the wheel: nothing in
``sidecar`` or ``spark_consumer`` imports it.
"""
