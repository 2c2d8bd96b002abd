"""The parts of timesync's contract that the deploy artifacts must match, written out here.

Kept in the tests on purpose (not read from the docs): a key or metric renamed in the code or
the docs must be renamed here too, and the deploy tests then show every artifact to update.
"""

from __future__ import annotations

# Every config key of the sidecar, with its default ("" = none / required).
CONFIG_DEFAULTS: dict[str, str] = {
    "bootstrap.servers": "",
    "input.topics": "",
    "output.topic": "",
    "group.id": "",
    "auto.offset.reset": "earliest",
    "task.grouping": "single",
    "task.grouping.single.guard": "true",
    "max.task.idle.ms": "0",
    "buffered.records.per.partition": "1000",
    "timestamp.extractor": "record",
    "timestamp.invalid": "fail",
    "late.records": "forward",
    "processing.guarantee": "at_least_once",
    "errors.tolerance": "none",
    "errors.deadletterqueue.topic.name": "",
    "errors.deadletterqueue.max.ratio": "0.5",
    "compression.type": "lz4",
    "compression.lz4.level": "9",
    "compression.zstd.level": "3",
    "compression.gzip.level": "-1",
    "linger.ms": "5",
    "delivery.timeout.ms": "120000",
    "replication.factor": "-1",
    "watermark.policy": "auto",
    "watermark.max.delay.ms": "5000",
    "watermark.window.ms": "60000",
    "watermark.idle.epsilon.ms": "2000",
    "watermark.heartbeat.ms": "1000",
    # Outside a container the default host is 127.0.0.1; the image and the chart use 0.0.0.0.
    "http.host": "0.0.0.0",
    "http.port": "8080",
    "security.protocol": "",
}
CONFIG_KEYS = frozenset(CONFIG_DEFAULTS)
# Secrets: never in a ConfigMap or values.yaml; they come from a Secret as TIMESYNC_* variables.
SECRET_KEYS = frozenset({"http.auth.token"})
# Passed through to the Kafka clients: any key under these prefixes.
PASSTHROUGH_PREFIXES = ("ssl.", "sasl.")


def is_config_key(key: str) -> bool:
    return key in CONFIG_KEYS or key.startswith(PASSTHROUGH_PREFIXES)


def env_name(key: str) -> str:
    """``max.task.idle.ms`` → ``TIMESYNC_MAX_TASK_IDLE_MS``."""
    return "TIMESYNC_" + key.upper().replace(".", "_").replace("-", "_")


# Prometheus series the sidecar exposes, and the labels each one carries.
METRICS: dict[str, frozenset[str]] = {
    "timesync_records_in_total": frozenset(),
    "timesync_records_out_total": frozenset(),
    "timesync_enforced_processing_total": frozenset(),
    "timesync_late_records_total": frozenset(),
    "timesync_dropped_records_total": frozenset({"reason"}),
    "timesync_record_lateness_seconds": frozenset({"le"}),  # histogram
    "timesync_consumer_lag": frozenset({"topic", "partition"}),
    "timesync_buffered_records": frozenset({"topic", "partition"}),
    "timesync_watermark_seconds": frozenset({"task"}),
    "timesync_stream_time_seconds": frozenset({"task"}),
}
HISTOGRAMS = frozenset({"timesync_record_lateness_seconds"})
# Labels Prometheus adds to every series from its scrape target.
TARGET_LABELS = frozenset({"job", "instance", "namespace", "pod", "container", "service"})


def base_metric(series: str) -> str | None:
    """The metric a series name belongs to (``..._bucket`` → its histogram), or None."""
    if series in METRICS:
        return series
    for suffix in ("_bucket", "_sum", "_count"):
        name = series.removesuffix(suffix)
        if name != series and name in HISTOGRAMS:
            return name
    return None
