"""Every package reads in pieces: no module over 400 lines (Python or Cython), no function over 60.

The house rules hold in every package of the checkout, not just the sidecar: ``sidecar/``,
``timesync_wire/``, ``spark_consumer/``, ``bench/``, ``deploy/`` and ``testkit/``. A module that
grows past 400 lines is holding more than one idea and is split by what it holds; a function past
60 lines is split into named steps. The core has its own copy of both rules beside its other
layout rules (``tests/unit/core/test_layout.py``) and ruff's complexity rules on top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("sidecar", "timesync_wire", "spark_consumer", "bench", "deploy", "testkit")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def sources(package: str, suffixes: frozenset[str]) -> list[Path]:
    return sorted(
        p
        for p in (REPO / package).rglob("*")
        if p.suffix in suffixes and p.is_file() and "__pycache__" not in p.parts
    )


def test_every_package_is_here() -> None:
    """A renamed or moved package must not drop out of the rules unnoticed."""
    for package in PACKAGES:
        assert sources(package, frozenset({".py"})), f"{package}/ holds no Python module"


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_is_over_400_lines(package: str) -> None:
    long = {
        str(p.relative_to(REPO)): n
        for p in sources(package, frozenset({".py", ".pyx", ".pxd"}))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"split these by what they hold: {long}"


@pytest.mark.parametrize("package", PACKAGES)
def test_no_function_is_over_60_lines(package: str) -> None:
    long = {
        f"{path.relative_to(REPO)}:{node.name}": length
        for path in sources(package, frozenset({".py"}))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (length := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
    }
    assert not long, f"split these into named steps: {long}"
