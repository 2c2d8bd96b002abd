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
    for package in ("sidecar", "spark_consumer", "timesync_wire"):
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
    assert "timesync_wire/formats/json_scan.py" in names  # the plans' specifications, which then run
    assert not [n for n in names if n.endswith(".so")]


# -- dependency floors ---------------------------------------------------------------------------

#: The lowest release of each dependency past its published advisories (issue 27, finding 7).
SAFE_FLOORS = {
    "aiohttp": "3.14.1",
    "protobuf": "6.31.1",  # CVE-2025-4565
    "grpcio": "1.68.1",  # CVE-2024-7246, CVE-2024-11407
    "grpcio-status": "1.68.1",
}


def test_no_dependency_floor_admits_a_release_with_a_known_advisory() -> None:
    import tomllib

    from packaging.requirements import Requirement
    from packaging.version import Version

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [Requirement(r) for r in project["dependencies"]]
    requirements += [Requirement(r) for extra in project["optional-dependencies"].values() for r in extra]
    floors = {r.name: r for r in requirements if r.name in SAFE_FLOORS}
    assert set(floors) == set(SAFE_FLOORS)
    for name, requirement in floors.items():
        *head, last = Version(SAFE_FLOORS[name]).release
        just_below = Version(".".join(map(str, (*head, last - 1))))  # the last release line's previous
        assert not requirement.specifier.contains(just_below), f"{requirement} admits {just_below}"
        assert requirement.specifier.contains(SAFE_FLOORS[name])


def test_the_kafka_client_beside_the_spark_connector_is_pinned_past_the_2025_cves() -> None:
    import xml.etree.ElementTree as ET

    from packaging.version import Version

    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    pom = ET.parse(ROOT / "deploy" / "local" / "spark" / "pom.xml").getroot()
    managed = {
        d.findtext("m:artifactId", namespaces=ns): d.findtext("m:version", namespaces=ns)
        for d in pom.findall("m:dependencyManagement/m:dependencies/m:dependency", ns)
    }
    assert Version(managed["kafka-clients"] or "0") >= Version("3.9.1")
