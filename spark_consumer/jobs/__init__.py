"""The Spark jobs over the ordered topic: ``join``, ``aggregate``, ``suppress``.

Each job is a module with a pure DataFrame function (the semantics, testable on any stream with
the ordered topic's columns) and ``build(spark, source, options)`` that wires it to the Kafka
source and returns a :class:`JobOutput` ready for a sink; beside it, ``<job>_cli.py`` holds its
command line (a :class:`~spark_consumer.jobs.command.Job`), and :mod:`.registry` lists the jobs
``timesync-spark`` runs. ``window_cli`` holds the window options two jobs share.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True, slots=True)
class JobOutput:
    """A job's result stream and how it may be written.

    ``frame`` has a string ``key`` and a BIGINT ``ts`` (epoch ms, the output event time) among
    its columns; ``output_mode`` is the Structured Streaming output mode it needs.
    ``check_checkpoint``, when set, is called with the checkpoint directory before the query
    starts and raises when the job cannot resume from it (its message says why and what to do).
    """

    frame: DataFrame
    output_mode: str
    check_checkpoint: Callable[[str], None] | None = None
