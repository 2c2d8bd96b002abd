"""The core reads in pieces: no module over 400 lines, no function over 60.

Ruff holds the core's functions to its complexity rules (branches, statements, arguments); the
lengths are held here, since no lint rule counts them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import sidecar.core

CORE = Path(sidecar.core.__file__).parent
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def test_no_core_module_is_over_400_lines() -> None:
    long = {p.name: n for p in CORE.glob("*.py") if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"split these by what they hold: {long}"


def test_no_core_function_is_over_60_lines() -> None:
    long = {
        f"{path.name}:{node.name}": length
        for path in CORE.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (length := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
    }
    assert not long, f"split these into named steps: {long}"
