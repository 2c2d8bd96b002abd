"""The environment Kubernetes gives a pod for the Services we ship (service links).

Unless a pod sets ``enableServiceLinks: false``, the kubelet adds variables for every Service of
the pod's namespace that has a cluster IP (headless Services get none). With ``SVC`` the
Service's name upper-cased, ``-`` turned into ``_``, and its first port ``P`` (protocol
``PROTO``, lower case ``proto``, cluster IP ``IP``)::

    SVC_SERVICE_HOST=IP
    SVC_SERVICE_PORT=P
    SVC_PORT=proto://IP:P

and for every port ``N`` (a named port ``NAME`` also gets ``SVC_SERVICE_PORT_NAME=N``)::

    SVC_PORT_N_PROTO=proto://IP:N
    SVC_PORT_N_PROTO_PROTO=proto
    SVC_PORT_N_PROTO_PORT=N
    SVC_PORT_N_PROTO_ADDR=IP

This module writes those variables for the Services in ``deploy/k8s`` and for the ones the Helm
chart renders, so tests can hand them to the sidecar as a pod would.

The chart's Services, without helm: ``make test`` does not build helm (``make deploy-check``
does), so :func:`chart_services` derives them from the chart's files. ``templates/service.yaml``
is the chart's only Service; it is named by ``timesync.fullname`` (``_helpers.tpl``:
``fullnameOverride``, else the release name when it contains the chart's name, else
``<release>-<chart name>``) and has one TCP port named ``http-metrics`` numbered
``.Values.service.port``. :func:`chart_services` checks that the template still says exactly
that and fails otherwise; ``tests/deploy/test_service_links.py`` compares it with what helm
really renders when helm is built.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
CHART = REPO / "deploy" / "helm" / "timesync"

#: Release names that give different Service names: the chart's own name (Service ``timesync``,
#: so ``TIMESYNC_PORT``), one that contains it, and one that does not.
RELEASES = ("timesync", "timesync-prod", "ts")


def manifest_services() -> list[dict[str, Any]]:
    """Every ``kind: Service`` object in ``deploy/k8s/*.yaml``."""
    services = []
    for path in sorted(K8S.glob("*.yaml")):
        with path.open() as f:
            services += [d for d in yaml.safe_load_all(f) if d and d.get("kind") == "Service"]
    return services


def chart_services(release: str) -> list[dict[str, Any]]:
    """The Services ``helm template <release> deploy/helm/timesync`` renders with default values."""
    templates = sorted((CHART / "templates").glob("*.yaml"))
    with_services = [t for t in templates if re.search(r"^kind: Service\s*$", t.read_text(), re.M)]
    assert with_services == [CHART / "templates" / "service.yaml"], (
        f"the chart's Services changed ({with_services}): update chart_services()"
    )
    template = with_services[0].read_text()
    for expected in (
        'name: {{ include "timesync.fullname" . }}',
        "- name: http-metrics",
        "port: {{ .Values.service.port }}",
        "protocol: TCP",
    ):
        assert expected in template, (
            f"templates/service.yaml no longer has {expected!r}: update chart_services()"
        )
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    name = values.get("nameOverride") or chart["name"]
    if values.get("fullnameOverride"):
        fullname = values["fullnameOverride"]
    elif name in release:
        fullname = release
    else:
        fullname = f"{release}-{name}"
    fullname = fullname[:63].rstrip("-")
    port = {"name": "http-metrics", "port": int(values["service"]["port"]), "protocol": "TCP"}
    return [{"kind": "Service", "metadata": {"name": fullname}, "spec": {"ports": [port]}}]


def shipped_services() -> list[dict[str, Any]]:
    """Our manifests' Services and the chart's for every release name in :data:`RELEASES`."""
    services = manifest_services()
    for release in RELEASES:
        services += chart_services(release)
    return services


def link_variables(service: Mapping[str, Any], cluster_ip: str) -> dict[str, str]:
    """The variables the kubelet sets for ``service`` at ``cluster_ip`` (see the module doc)."""
    spec = service.get("spec", {})
    if spec.get("clusterIP") == "None":
        return {}
    prefix = service["metadata"]["name"].upper().replace("-", "_")
    host = f"[{cluster_ip}]" if ipaddress.ip_address(cluster_ip).version == 6 else cluster_ip
    ports = spec.get("ports", [])
    env: dict[str, str] = {}
    for index, port in enumerate(ports):
        number = str(port["port"])
        proto = port.get("protocol", "TCP")
        url = f"{proto.lower()}://{host}:{number}"
        if index == 0:
            env[f"{prefix}_SERVICE_HOST"] = cluster_ip
            env[f"{prefix}_SERVICE_PORT"] = number
            env[f"{prefix}_PORT"] = url
        if port.get("name"):
            env[f"{prefix}_SERVICE_PORT_{port['name'].upper().replace('-', '_')}"] = number
        base = f"{prefix}_PORT_{number}_{proto}"
        env[base] = url
        env[f"{base}_PROTO"] = proto.lower()
        env[f"{base}_PORT"] = number
        env[f"{base}_ADDR"] = cluster_ip
    return env


def cluster_ips(version: int) -> Iterator[str]:
    """Distinct cluster IPs of one family, as a Service CIDR hands them out."""
    network = ipaddress.ip_network("10.96.0.0/12" if version == 4 else "fd00:10:96::/108")
    hosts = network.hosts()
    next(hosts)  # the first address is the API server's (the `kubernetes` Service)
    for address in hosts:
        yield str(address)


def service_link_env(services: Iterable[Mapping[str, Any]], ip_version: int = 4) -> dict[str, str]:
    """What a pod in the namespace of ``services`` gets, including the ``kubernetes`` Service's."""
    api = {"metadata": {"name": "kubernetes"}, "spec": {"ports": [{"name": "https", "port": 443}]}}
    ips = cluster_ips(ip_version)
    first = str(next(ipaddress.ip_network("10.96.0.0/12" if ip_version == 4 else "fd00:10:96::/108").hosts()))
    env = link_variables(api, first)
    for service in services:
        env.update(link_variables(service, next(ips)))
    return env
