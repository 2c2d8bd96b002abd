"""The delivery package is the one place that knows which guarantees exist and what they change."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import sidecar
from sidecar.config import SidecarConfig
from sidecar.service.delivery import GUARANTEES

SIDECAR = Path(sidecar.__file__).parent
#: Where a guarantee's name may stand outside the delivery package, and why.
MAY_NAME_A_GUARANTEE = {
    SIDECAR / "config" / "model.py": "the setting's type: the values a user may write",
    SIDECAR / "service" / "failures.py": "the failure table: rows name the guarantee they hold under (data)",
}


def test_every_guarantee_the_config_accepts_has_a_delivery() -> None:
    accepted = get_args(SidecarConfig.model_fields["processing_guarantee"].annotation)
    assert set(accepted) == set(GUARANTEES)


def test_no_code_outside_the_delivery_compares_or_passes_a_guarantees_name() -> None:
    """Adding a guarantee touches the delivery package, not every module that once asked
    ``processing_guarantee == "exactly_once_v2"`` (docstrings may still explain one)."""
    named = []
    for path in sorted(SIDECAR.rglob("*.py")):
        if (SIDECAR / "service" / "delivery") in path.parents or path in MAY_NAME_A_GUARANTEE:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value in GUARANTEES:
                named.append(f"{path.relative_to(SIDECAR)}:{node.lineno}: {node.value}")
    assert named == []
