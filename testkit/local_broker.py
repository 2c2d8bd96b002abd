"""The broker for the demo and the benchmark: ``KAFKA_BOOTSTRAP_SERVERS`` if set, else a local one."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def load_launcher() -> ModuleType:
    """Import ``deploy/local/kafka.py`` (a standalone script, not a package) as a module."""
    name = "timesync_local_kafka"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "deploy" / "local" / "kafka.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {REPO / 'deploy' / 'local' / 'kafka.py'}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_registry_launcher() -> ModuleType:
    """Import ``deploy/local/registry.py`` (the local Schema Registry's launcher) as a module."""
    name = "timesync_local_registry"
    if name in sys.modules:
        return sys.modules[name]
    path = REPO / "deploy" / "local" / "registry.py"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@contextmanager
def kafka(settings: object = None) -> Iterator[str]:
    """Yield a bootstrap address; a broker started here is stopped (and its data removed) on exit.

    ``settings``: the launcher's ``BrokerSettings`` for a broker started here (default: its
    defaults)."""
    existing = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if existing:
        yield existing
        return
    broker = load_launcher().start_broker(settings, die_with_parent=True)
    try:
        yield broker.bootstrap
    finally:
        broker.stop()
