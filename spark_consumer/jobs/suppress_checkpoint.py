"""Refuse a ``suppress`` checkpoint whose per-key state has another layout, before Spark starts.

The per-key state of ``suppress`` changed layout when the rule moved into the JVM operator:
until then it was four state variables of a ``transformWithStateInPandas`` operator
(``stream_time``, ``windows``, ``replay_ids``, ``evicted``); now it is one row per key in the
variable the operator names (``key_state_v2``, the version in the name). Spark would stop such a
query with a long error about mismatched operators; this check says what happened and what to do
instead, in one line, before the query starts.

Spark writes each stateful operator's metadata (its name and state variables) as JSON under
``<checkpoint>/state/<operator>/_metadata/v2/<batch>``. Only checkpoints on the local file system
are read here; elsewhere (HDFS, object stores) Spark's own error remains.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlparse

from spark_consumer.options import UsageError

PANDAS_OPERATOR = "transformWithStateInPandasExec"


def local_path(checkpoint: str) -> Path | None:
    """The checkpoint as a local path, or ``None`` when it lives on another file system."""
    parsed = urlparse(checkpoint)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme else checkpoint)
    return None


def state_variables(checkpoint: Path) -> list[tuple[str, list[str]]]:
    """(operator name, its state variables) for each stateful operator the checkpoint holds,
    from the newest metadata of each; empty for a new checkpoint."""
    found = []
    for versions in sorted(checkpoint.glob("state/*/_metadata/v2")):
        batches = [p for p in versions.iterdir() if p.name.isdigit()]
        if not batches:
            continue
        newest = max(batches, key=lambda p: int(p.name))
        lines = newest.read_text(encoding="utf-8").splitlines()
        meta = json.loads(lines[1]) if len(lines) > 1 else {}
        name = str(meta.get("operatorInfo", {}).get("operatorName", ""))
        properties = json.loads(meta.get("operatorPropertiesJson") or "{}")
        variables = [str(v.get("stateName")) for v in properties.get("stateVariables", [])]
        found.append((name, variables))
    return found


def check_layout(checkpoint: str, variable: str) -> None:
    """Raise :class:`UsageError` when ``checkpoint`` holds per-key state not in ``variable``."""
    path = local_path(checkpoint)
    if path is None or not path.is_dir():
        return
    for operator, variables in state_variables(path):
        if operator == PANDAS_OPERATOR or (variables and variable not in variables):
            raise UsageError(
                f"--checkpoint: {checkpoint} holds suppress state of an earlier layout "
                f"({operator}: {', '.join(v for v in variables if not v.startswith('$'))}), which this "
                f"version cannot read; start from a new --checkpoint (keys start afresh; finals already "
                "written stay written) or finish this one with the earlier release"
            )
