"""One broker and one registry for every xdist worker of a run, started by the controller.

Without this, each worker's ``bootstrap`` and ``schema_registry`` session fixtures start a broker
and a registry of their own: three brokers and two registries on a two-core machine, for tests
that only ever share a broker through unique topic names anyway. Under ``pytest -n N`` (N > 1)
the controller starts one of each before the workers exist and hands them over the way a user
hands over an existing cluster, ``KAFKA_BOOTSTRAP_SERVERS`` and ``SCHEMA_REGISTRY_URL`` (the
workers inherit the controller's environment), so the fixtures take the first branch of their
order and start nothing. Nothing is started when either is already set, when a Docker engine
would give the fixtures testcontainers' broker, or when the run holds only unit tests.

Both are started in the controller's main thread: ``die_with_parent`` ties a server to the
thread that spawned it (Linux's parent-death signal), so an interrupted run leaves no JVM
behind, and a thread that ended would take its server with it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

#: What the controller started, stopped in reverse at ``pytest_unconfigure``.
_STOPS: list[Callable[[], None]] = []


def _only_unit_tests(config: pytest.Config) -> bool:
    tests = Path(config.rootpath, "tests")
    unit = tests / "unit"
    args = [Path(a.split("::")[0]).resolve() for a in config.args] or [tests]
    return all(a == unit or unit in a.parents for a in args)


def _is_controller_of_workers(config: pytest.Config) -> bool:
    workers = getattr(config.option, "numprocesses", None) or 0
    dist = getattr(config.option, "dist", "no")
    return not hasattr(config, "workerinput") and isinstance(workers, int) and workers > 1 and dist != "no"


def start(config: pytest.Config, docker_engine_answers: Callable[[], bool]) -> None:
    """In the controller of an xdist run: start the run's broker and registry (see the module
    docstring) and export their addresses to the workers."""
    if not _is_controller_of_workers(config) or _only_unit_tests(config):
        return
    from testkit.local_broker import load_launcher, load_registry_launcher

    if not os.environ.get("KAFKA_BOOTSTRAP_SERVERS") and not docker_engine_answers():
        broker = load_launcher().start_broker(die_with_parent=True)
        _STOPS.append(broker.stop)
        os.environ["KAFKA_BOOTSTRAP_SERVERS"] = broker.bootstrap
    if not os.environ.get("SCHEMA_REGISTRY_URL"):
        registry = load_registry_launcher().start_registry(die_with_parent=True)
        _STOPS.append(registry.stop)
        os.environ["SCHEMA_REGISTRY_URL"] = registry.url


def stop() -> None:
    """Stop what :func:`start` started, last first."""
    while _STOPS:
        _STOPS.pop()()
