"""What the launcher needs from the checkout and the machine: its folders, Java, the broker jars.

The jars come from Maven Central through ``mvn -f deploy/local/pom.xml dependency:copy-dependencies``
into ``.cache/jars/broker``, once; :func:`ensure_jars` fetches them when they are missing.
:class:`LauncherError` is every problem the user can fix: the command line prints it as one line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
POM = REPO / "deploy" / "local" / "pom.xml"
JARS = REPO / ".cache" / "jars" / "broker"
RUN_DIR = REPO / ".cache" / "kafka"
STATE_FILE = RUN_DIR / "broker.json"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


class LauncherError(RuntimeError):
    """A problem the user can fix; the CLI prints it as one line and exits 1."""


def ensure_jars(quiet: bool = True) -> Path:
    """Fetch the broker jars with Maven if they are not cached yet; return their folder."""
    if JARS.is_dir() and any(JARS.glob("kafka_2.13-*.jar")):
        return JARS
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LauncherError(
            "mvn not found on PATH: install Apache Maven (the broker jars come from Maven Central)"
        )
    cmd = [mvn, "-B", "-f", str(POM), "dependency:copy-dependencies"]
    if quiet:
        cmd.insert(1, "-q")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not any(JARS.glob("kafka_2.13-*.jar")):
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise LauncherError(f"mvn could not fetch the Kafka jars (exit {proc.returncode}):\n{tail}")
    return JARS


def java() -> str:
    """``$JAVA_HOME/bin/java``, else ``java`` on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise LauncherError("java not found on PATH: install a Java 17+ runtime or set JAVA_HOME")
    return found
