"""The parts of timesync's contract that the deploy artifacts must match.

The config keys are written out here on purpose (not read from the docs): a key renamed in the
code or the docs must be renamed here too, and the deploy tests then show every artifact to
update. The metrics are read from the sidecar's registry, so that a new metric fails the
dashboard and docs checks until it is shown there.
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
    "max.task.idle.budget.ms": "1000",
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
    "schema.registry.url": "",
    "schema.registry.ssl.cafile": "",
    "schema.registry.missing.id.ttl.ms": "10000",
    "schema.registry.max.new.ids.per.fetch": "500",
    "schema.registry.unhealthy.after.ms": "300000",
}
CONFIG_KEYS = frozenset(CONFIG_DEFAULTS)
# Secrets: never in a ConfigMap or values.yaml; they come from a Secret as TIMESYNC_* variables.
SECRET_KEYS = frozenset(
    {"http.auth.token", "schema.registry.basic.auth.user.info", "schema.registry.bearer.auth.token"}
)
# Passed through to the Kafka clients: any key under these prefixes.
PASSTHROUGH_PREFIXES = ("ssl.", "sasl.")


def is_config_key(key: str) -> bool:
    return key in CONFIG_KEYS or key.startswith(PASSTHROUGH_PREFIXES)


def env_name(key: str) -> str:
    """``max.task.idle.ms`` → ``TIMESYNC_MAX_TASK_IDLE_MS``."""
    return "TIMESYNC_" + key.upper().replace(".", "_").replace("-", "_")


def _exposed_metrics() -> dict[str, frozenset[str]]:
    """Series name → labels, from the sidecar's own registry (not a copy kept here): a metric
    added to ``sidecar/service/metrics.py`` must then reach the dashboard and the docs.

    A counter ``x`` is exposed as ``x_total``; a histogram's series carry ``le``. prometheus_client
    keeps a metric's label names in ``_labelnames`` (it has no public accessor for them)."""
    from prometheus_client.metrics import MetricWrapperBase

    from sidecar.service.metrics import Metrics

    metrics = Metrics()
    labels = {
        m._name: frozenset(m._labelnames) for m in vars(metrics).values() if isinstance(m, MetricWrapperBase)
    }
    exposed: dict[str, frozenset[str]] = {}
    for family in metrics.registry.collect():
        if family.type == "counter":
            exposed[family.name + "_total"] = labels[family.name]
        elif family.type == "histogram":
            exposed[family.name] = labels.get(family.name, frozenset()) | {"le"}
        else:
            exposed[family.name] = labels[family.name]
    return exposed


def _histograms() -> frozenset[str]:
    from sidecar.service.metrics import Metrics

    return frozenset(f.name for f in Metrics().registry.collect() if f.type == "histogram")


# Prometheus series the sidecar exposes, and the labels each one carries.
METRICS: dict[str, frozenset[str]] = _exposed_metrics()
HISTOGRAMS = _histograms()
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
