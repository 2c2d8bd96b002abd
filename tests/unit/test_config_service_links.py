"""Kubernetes' service-link variables never stop the sidecar; real typos still do.

Every pod gets ``<SERVICE>_PORT=tcp://…`` and friends for every Service of its namespace. Ours
are named ``timesync-…`` (``deploy/k8s/service.yaml``: ``timesync-metrics``; the chart: the
release's full name, ``timesync`` for a release called timesync), so the variables start with
``TIMESYNC_`` like the sidecar's own, which must not be read as unknown keys.
"""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from sidecar.config import ConfigError, load_config, service_link
from tests.deploy.service_links import (
    RELEASES,
    chart_services,
    manifest_services,
    service_link_env,
    shipped_services,
)

REQUIRED = {
    "TIMESYNC_BOOTSTRAP_SERVERS": "kafka:9092",
    "TIMESYNC_INPUT_TOPICS": "orders,payments",
    "TIMESYNC_OUTPUT_TOPIC": "orders-payments.ordered",
}


def test_our_services_give_timesync_prefixed_link_variables() -> None:
    names = [s["metadata"]["name"] for s in shipped_services()]
    assert "timesync-metrics" in names
    assert "timesync" in names  # the chart, release "timesync"
    env = service_link_env(shipped_services())
    assert env["TIMESYNC_METRICS_PORT"].startswith("tcp://10.")
    assert env["TIMESYNC_PORT_8080_TCP_ADDR"].startswith("10.")
    assert env["TIMESYNC_METRICS_SERVICE_PORT_HTTP_METRICS"] == "8080"


@pytest.mark.parametrize("ip_version", [4, 6])
def test_every_link_variable_of_our_services_is_ignored(ip_version: int) -> None:
    links = service_link_env(shipped_services(), ip_version)
    prefixed = {k for k in links if k.startswith("TIMESYNC_")}
    assert len(prefixed) >= 24  # 8 per Service: timesync-metrics, timesync, timesync-prod

    config = load_config(environ={**links, **REQUIRED})
    assert config == load_config(environ=REQUIRED)


@pytest.mark.parametrize("release", RELEASES)
def test_the_chart_services_of_each_release_are_ignored(release: str) -> None:
    links = service_link_env([*manifest_services(), *chart_services(release)])
    assert load_config(environ={**links, **REQUIRED}).bootstrap_servers == "kafka:9092"


def test_each_ignored_variable_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    links = service_link_env(manifest_services())
    with caplog.at_level(logging.DEBUG, logger="sidecar.config"):
        load_config(environ={**links, **REQUIRED})
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    for name in (n for n in links if n.startswith("TIMESYNC_")):
        assert any(m.startswith(f"ignoring {name}: a Kubernetes service-link variable") for m in messages)


def test_the_cli_starts_past_the_config_with_the_link_variables() -> None:
    # The reproduction: the real entry point, with a pod's environment. --version would
    # not load the config, so ask for a config error that comes *after* the environment is read.
    env = {"PATH": "/usr/bin:/bin", **service_link_env(shipped_services()), **REQUIRED}
    env["TIMESYNC_MAX_TASK_IDLE_MS"] = "soon"
    result = subprocess.run(
        [sys.executable, "-m", "sidecar"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "max.task.idle.ms = 'soon' (from env TIMESYNC_MAX_TASK_IDLE_MS)" in result.stderr
    assert "unknown environment variable" not in result.stderr


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TIMESYNC_HTTP_PROT", "8080"),  # a typo of a key, whatever its value
        ("TIMESYNC_METRICS_PORT", "8080"),  # a link's name, but not a link's value
        ("TIMESYNC_METRICS_PORT", "tcp://metrics:8080"),  # links hold IP addresses, not names
        ("TIMESYNC_METRICS_PORT_8080_TCP", "tcp://10.0.0.1:9090"),  # the port differs from the name's
        ("TIMESYNC_METRICS_PORT_8080_TCP_PROTO", "udp"),  # so does the protocol
        ("TIMESYNC_METRICS_SERVICE_HOST", "metrics.local"),
        ("TIMESYNC_METRICS_SERVICE_PORT", "0"),
        ("timesync_metrics_port", "tcp://10.0.0.1:8080"),  # the kubelet writes upper case only
    ],
)
def test_a_variable_that_is_not_a_link_is_still_an_unknown_key(name: str, value: str) -> None:
    assert service_link(name, value) is None
    with pytest.raises(ConfigError, match=f"unknown environment variable '{name}'"):
        load_config(environ={**REQUIRED, name: value})


@pytest.mark.parametrize(
    ("name", "value", "service"),
    [
        ("TIMESYNC_METRICS_SERVICE_HOST", "10.0.0.1", "TIMESYNC_METRICS"),
        ("TIMESYNC_METRICS_SERVICE_PORT", "8080", "TIMESYNC_METRICS"),
        ("TIMESYNC_METRICS_SERVICE_PORT_HTTP_METRICS", "8080", "TIMESYNC_METRICS"),
        ("TIMESYNC_METRICS_PORT", "tcp://10.0.0.1:8080", "TIMESYNC_METRICS"),
        ("TIMESYNC_METRICS_PORT_8080_TCP", "tcp://10.0.0.1:8080", "TIMESYNC_METRICS"),
        ("TIMESYNC_METRICS_PORT_8080_TCP_PROTO", "tcp", "TIMESYNC_METRICS"),
        ("TIMESYNC_METRICS_PORT_8080_TCP_PORT", "8080", "TIMESYNC_METRICS"),
        ("TIMESYNC_METRICS_PORT_8080_TCP_ADDR", "10.0.0.1", "TIMESYNC_METRICS"),
        ("TIMESYNC_PORT", "tcp://[fd00::a]:8080", "TIMESYNC"),
        ("TIMESYNC_DNS_PORT_53_UDP", "udp://10.0.0.9:53", "TIMESYNC_DNS"),
    ],
)
def test_each_shape_of_link_names_its_service(name: str, value: str, service: str) -> None:
    assert service_link(name, value) == service


def test_a_link_over_a_key_variable_is_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    # A Service named timesync-http gives TIMESYNC_HTTP_PORT=tcp://…, which Kubernetes sets over the
    # image's TIMESYNC_HTTP_PORT. No key takes such a value: ignore it, loudly.
    with caplog.at_level(logging.WARNING, logger="sidecar.config"):
        config = load_config(environ={**REQUIRED, "TIMESYNC_HTTP_PORT": "tcp://10.0.0.7:8080"})
    assert config.http_port == 8080
    assert "ignoring TIMESYNC_HTTP_PORT=tcp://10.0.0.7:8080: a Kubernetes service link" in caplog.text
    assert "enableServiceLinks: false" in caplog.text
