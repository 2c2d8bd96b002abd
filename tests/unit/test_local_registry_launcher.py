"""The local Schema Registry launcher finds a Java 21+ and says in one line when there is none."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.local_broker import REPO, load_registry_launcher

LAUNCHER = REPO / "deploy" / "local" / "registry.py"


def jdk(root: Path, name: str, version: str) -> Path:
    home = root / name
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text("#!/bin/sh\n")
    (home / "release").write_text(f'IMPLEMENTOR="x"\nJAVA_VERSION="{version}"\n')
    return home


@pytest.fixture
def no_java_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("TIMESYNC_REGISTRY_JAVA", "JAVA_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))


@pytest.mark.usefixtures("no_java_env")
def test_the_newest_jdk_of_release_21_or_later_is_chosen(tmp_path: Path) -> None:
    root = tmp_path / "jvm"
    jdk(root, "java-17", "17.0.12")
    jdk(root, "temurin-21", "21.0.4")
    newest = jdk(root, "temurin-25", "25.0.3")
    assert load_registry_launcher().find_java(root) == str(newest / "bin" / "java")


@pytest.mark.usefixtures("no_java_env")
def test_without_java_21_the_error_says_what_is_missing(tmp_path: Path) -> None:
    root = tmp_path / "jvm"
    jdk(root, "java-17", "17.0.12")
    launcher = load_registry_launcher()
    with pytest.raises(launcher.LauncherError, match=r"no Java 21\+ found .*set TIMESYNC_REGISTRY_JAVA"):
        launcher.find_java(root)


def test_a_wrong_override_is_one_line_and_exit_1(tmp_path: Path) -> None:
    env = os.environ | {"TIMESYNC_REGISTRY_JAVA": str(tmp_path / "nope")}
    done = subprocess.run(
        [sys.executable, str(LAUNCHER), "--state", str(tmp_path / "s.json"), "start"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"registry: TIMESYNC_REGISTRY_JAVA={tmp_path / 'nope'} is neither a java binary nor a JDK folder"
    ]
    assert done.stdout == ""
