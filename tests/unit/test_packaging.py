"""The package installs on a machine without a C compiler: the output encoder is optional.

README promises it (the sidecar then stamps in Python), and cythonize() silently drops
``optional`` from the extensions it returns — this test caught exactly that.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_without_a_c_compiler_the_package_builds_without_the_encoder(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE", "MANIFEST.in"):
        shutil.copy(ROOT / name, source / name)
    for package in ("sidecar", "spark_consumer"):
        shutil.copytree(
            ROOT / package, source / package, ignore=shutil.ignore_patterns("*.so", "*.c", "__pycache__")
        )
    out = tmp_path / "wheel"
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            ".",
        ],
        cwd=source,
        env={**os.environ, "CC": "false"},  # a "compiler" that always fails
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = out.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "sidecar/output/batches.py" in names
    assert not [n for n in names if n.endswith(".so")]
