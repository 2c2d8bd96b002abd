"""Refuse a ``join`` checkpoint written by another plan, before Spark starts.

Until the interval-join operator, ``join`` ran Spark's own stream-stream join: three stateful
operators, each side's ``dedupeWithinWatermark`` and the ``symmetricHashJoin`` (four state stores
per side), whose metadata Spark 4.2 writes as ``state/<operator>/_metadata/metadata`` (v1). Now
it is one ``transformWithStateExec`` whose state variable names its layout (``join_buffers_v1``,
metadata v2, read by :func:`~spark_consumer.jobs.suppress_checkpoint.state_variables`). Spark
would stop such a query with a long error about mismatched operators; this check says what
happened and what to do instead, in one line, before the query starts: a new checkpoint, and the
``--starting-offsets`` where the old one stopped (read from its offset log), so that nothing is
joined twice.

Only checkpoints on the local file system are read here; elsewhere (HDFS, object stores) Spark's
own error remains.
"""

from __future__ import annotations

import json
from pathlib import Path

from spark_consumer.jobs.suppress_checkpoint import local_path, state_variables
from spark_consumer.options import UsageError

OPERATOR = "transformWithStateExec"


def v1_operators(checkpoint: Path) -> list[str]:
    """The operators whose metadata is v1 (``state/<op>/_metadata/metadata``): Spark's own join
    and deduplication write it."""
    names = []
    for meta in sorted(checkpoint.glob("state/*/_metadata/metadata")):
        lines = meta.read_text(encoding="utf-8").splitlines()
        info = json.loads(lines[1]) if len(lines) > 1 else {}
        names.append(str(info.get("operatorInfo", {}).get("operatorName", "")))
    return names


def stopped_at(checkpoint: Path) -> str | None:
    """The source offsets (Spark's JSON, as ``--starting-offsets`` takes them) of the newest
    committed batch, or ``None`` when no batch was committed."""
    committed = [int(p.name) for p in (checkpoint / "commits").glob("*") if p.name.isdigit()]
    if not committed:
        return None
    offsets = checkpoint / "offsets" / str(max(committed))
    lines = offsets.read_text(encoding="utf-8").splitlines() if offsets.is_file() else []
    return lines[2] if len(lines) > 2 else None


def check_plan(checkpoint: str, variable: str) -> None:
    """Raise :class:`UsageError` when ``checkpoint`` holds state of another plan than the
    operator writing ``variable``."""
    path = local_path(checkpoint)
    if path is None or not path.is_dir():
        return
    others = v1_operators(path) + [
        f"{op}: {', '.join(v for v in variables if not v.startswith('$'))}"
        for op, variables in state_variables(path)
        if op != OPERATOR or variable not in variables
    ]
    if not others:
        return
    others = list(dict.fromkeys(others))  # each side's deduplication: named once
    offsets = stopped_at(path)
    resume = f" with --starting-offsets '{offsets}', where this one stopped" if offsets else ""
    raise UsageError(
        f"--checkpoint: {checkpoint} holds the state of another join plan ({', '.join(others)}), which "
        f"this version cannot read; start from a new --checkpoint{resume} (records waiting there for a "
        "partner are not carried over), or finish this one with the earlier release"
    )
