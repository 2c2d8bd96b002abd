"""What a subcommand gives ``python -m bench``: one :class:`Command` value, and what they share.

A command owns its command line: the arguments only it takes, their checks, and what it runs.
``python -m bench`` finds the commands in :data:`bench.commands.COMMANDS` (as ``timesync-spark``
finds its jobs in ``spark_consumer/jobs/registry.py``). The helpers here are what several
commands share: their two output files, quiet aiokafka logs, a checked comma list of workloads.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import scenarios


@dataclass(frozen=True, slots=True)
class Command:
    """One ``python -m bench NAME`` subcommand.

    ``add_arguments`` adds the command's arguments to its subcommand's parser; ``run`` gets the
    parsed arguments and the parser (to report a usage error, exit 2) and returns the exit status.
    Heavy imports (the broker, Spark, the harness) belong inside ``run``, so that ``--help`` and
    the other commands do not pay for them.
    """

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, argparse.ArgumentParser], int]
    description: str | None = None


def write_outputs(out: Path, stem: str, results: Any, table: str) -> int:
    """``<stem>.json`` and ``<stem>.md`` into ``out``; the table and where they went, on the console."""
    from bench.progress import console

    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / f"{stem}.md").write_text(table if table.endswith("\n") else table + "\n")
    console.print(table)
    console.print(f"written: {out / f'{stem}.json'}, {out / f'{stem}.md'}")
    return 0


def stamp(quick: bool, load_at_start: list[float]) -> dict[str, Any]:
    """What a standalone command's JSON says of its run: whether it was a smoke run, when it
    ended and the machine's load around it (``python -m bench readme --extractors`` shows it)."""
    import datetime
    import os

    return {
        "quick": quick,
        "measured_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "load_average_at_start": load_at_start,
        "load_average_at_end": list(os.getloadavg()),
    }


def quiet_kafka_logs() -> None:
    import logging

    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)


def comma_list(text: str) -> list[str]:
    """``"a, b,,c"`` → ``["a", "b", "c"]``."""
    return [w.strip() for w in text.split(",") if w.strip()]


def unknown_workloads(names: list[str]) -> list[str]:
    """The names in ``names`` that are no workload of :mod:`bench.scenarios`."""
    return [w for w in names if w not in scenarios.NAMES]


def workloads_error(unknown: list[str]) -> str:
    return f"--workloads: unknown {', '.join(unknown)}; known: {', '.join(scenarios.NAMES)}"
