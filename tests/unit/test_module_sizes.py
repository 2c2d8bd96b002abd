"""The sidecar reads in pieces: no module in ``sidecar/`` or ``timesync_wire/`` over 400 lines,
Python or Cython.

The core holds its functions to 60 lines too (``tests/unit/core/test_layout.py``); elsewhere a
module that grows past 400 lines is holding more than one idea and is split by what it holds.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

import sidecar
import timesync_wire

MAX_MODULE_LINES = 400


@pytest.mark.parametrize("package", [sidecar, timesync_wire], ids=lambda p: p.__name__)
def test_no_module_is_over_400_lines(package: ModuleType) -> None:
    root = Path(package.__file__ or "").parent
    long = {
        str(p.relative_to(root)): n
        for p in root.rglob("*.py*")
        if p.suffix in {".py", ".pyx", ".pxd"}
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"split these by what they hold: {long}"
