"""The sidecar reads in pieces: no module in ``sidecar/`` over 400 lines, Python or Cython.

The core holds its functions to 60 lines too (``tests/unit/core/test_layout.py``); elsewhere a
module that grows past 400 lines is holding more than one idea and is split by what it holds.
"""

from __future__ import annotations

from pathlib import Path

import sidecar

SIDECAR = Path(sidecar.__file__).parent
MAX_MODULE_LINES = 400


def test_no_sidecar_module_is_over_400_lines() -> None:
    long = {
        str(p.relative_to(SIDECAR)): n
        for p in SIDECAR.rglob("*.py*")
        if p.suffix in {".py", ".pyx", ".pxd"}
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"split these by what they hold: {long}"
