"""Which ``TIMESYNC_*`` variables are the sidecar's: not the Spark job's, not Kubernetes' service links."""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Mapping

from sidecar.config.model import ENV_NAMES, ENV_PREFIX, SPARK_ENV_PREFIX, key_of

log = logging.getLogger("sidecar.config")

# -- Kubernetes service links ----------------------------------------------------------------------
# For every Service of the namespace (unless the pod sets enableServiceLinks: false) the kubelet
# sets, with SVC = the Service's name upper-cased and '-' turned into '_':
#   SVC_SERVICE_HOST=10.0.0.1             SVC_PORT=tcp://10.0.0.1:8080
#   SVC_SERVICE_PORT=8080                 SVC_PORT_8080_TCP=tcp://10.0.0.1:8080
#   SVC_SERVICE_PORT_HTTP_METRICS=8080    SVC_PORT_8080_TCP_PROTO=tcp
#                                         SVC_PORT_8080_TCP_PORT=8080
#                                         SVC_PORT_8080_TCP_ADDR=10.0.0.1
# SVC_PORT and SVC_SERVICE_PORT describe the Service's first port; every port gets the rest.
_SVC = r"(?P<svc>[A-Z][A-Z0-9_]*?)"
_LINK_NAMES = (
    ("host", re.compile(_SVC + r"_SERVICE_HOST")),
    ("port", re.compile(_SVC + r"_SERVICE_PORT(?:_[A-Z0-9_]+)?")),
    ("url", re.compile(_SVC + r"_PORT")),
    ("url", re.compile(_SVC + r"_PORT_(?P<port>\d+)_(?P<proto>TCP|UDP|SCTP)")),
    ("proto", re.compile(_SVC + r"_PORT_(?P<port>\d+)_(?P<proto>TCP|UDP|SCTP)_PROTO")),
    ("port", re.compile(_SVC + r"_PORT_(?P<port>\d+)_(?P<proto>TCP|UDP|SCTP)_PORT")),
    ("host", re.compile(_SVC + r"_PORT_(?P<port>\d+)_(?P<proto>TCP|UDP|SCTP)_ADDR")),
)
_LINK_URL = re.compile(
    r"(?P<proto>tcp|udp|sctp)://(?:\[(?P<ip6>[0-9A-Fa-f:.]+)\]|(?P<ip4>[0-9.]+)):(?P<port>\d+)"
)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _is_port(text: str) -> bool:
    return text.isascii() and text.isdigit() and 0 < int(text) < 65536


def _fits(kind: str, value: str, port: str | None, proto: str | None) -> bool:
    """Whether ``value`` has the shape the kubelet gives a variable of this ``kind``."""
    if kind == "host":
        return _is_ip(value)
    if kind == "port":
        return _is_port(value) and (port is None or value == port)
    if kind == "proto":
        return proto is not None and value == proto.lower()
    url = _LINK_URL.fullmatch(value)
    if url is None or not _is_ip(url["ip6"] or url["ip4"]) or not _is_port(url["port"]):
        return False
    return (port is None or url["port"] == port) and (proto is None or url["proto"] == proto.lower())


def service_link(name: str, value: str) -> str | None:
    """The Service a Kubernetes service-link variable describes (its name as the kubelet wrote it,
    e.g. ``TIMESYNC_METRICS``), or ``None`` when ``name=value`` is not one.

    Both must fit: the name one of the kubelet's shapes (exact, upper case) and the value what the
    kubelet puts there (an IP address, a port, ``tcp://ip:port`` with the name's port and
    protocol). So ``TIMESYNC_METRICS_PORT=tcp://10.0.0.1:8080`` is a link, while a typo such as
    ``TIMESYNC_HTTP_PROT=8080`` or ``TIMESYNC_METRICS_PORT=8080`` is not and stays an error.
    """
    for kind, pattern in _LINK_NAMES:
        match = pattern.fullmatch(name)
        if match is None:
            continue
        groups = match.groupdict()
        if _fits(kind, value.strip(), groups.get("port"), groups.get("proto")):
            return match["svc"]
    return None


def config_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """The ``TIMESYNC_*`` variables that are the sidecar's: not the Spark job's, not service links.

    A service link is logged at debug and dropped, even when its name is a key's variable (a
    Service named ``timesync-http`` gives ``TIMESYNC_HTTP_PORT=tcp://…``, which Kubernetes sets
    over the image's value): no key takes such a value, so it cannot be the user's setting.
    """
    out: dict[str, str] = {}
    for name, value in environ.items():
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper.startswith(SPARK_ENV_PREFIX):
            continue
        service = service_link(name, value)
        if service is not None:
            if upper in ENV_NAMES:
                log.warning(
                    "ignoring %s=%s: a Kubernetes service link (Service %s), not %s; set "
                    "enableServiceLinks: false in the pod spec",
                    name,
                    value,
                    service.lower().replace("_", "-"),
                    key_of(ENV_NAMES[upper]),
                )
            else:
                log.debug("ignoring %s: a Kubernetes service-link variable (Service %s)", name, service)
            continue
        out[name] = value
    return out
