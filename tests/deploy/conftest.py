"""Fixtures for the deploy/ checks: repository paths and the external tools.

hadolint, shellcheck and kubernetes-validate come with the [dev] extra. helm and checkov are
built by ``make deploy-check`` into ``.cache/tools`` (see the Makefile for why); tests that need
them carry the ``deploy_tools`` marker, which ``make test`` deselects.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
K8S = DEPLOY / "k8s"
CHART = DEPLOY / "helm" / "timesync"
TOOLS = REPO / ".cache" / "tools"


def venv_tool(name: str) -> str:
    """A console script installed beside this interpreter (the project's venv), or on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        pytest.fail(f"{name} not found beside {sys.executable} or on PATH: run `make venv` ([dev] extra)")
    return found


def built_tool(env: str, pattern: str) -> str:
    """A tool from ``make deploy-check``: ``$env`` if set, else the newest match in .cache/tools."""
    path = os.environ.get(env)
    if not path:
        matches = sorted(TOOLS.glob(pattern))
        path = str(matches[-1]) if matches else ""
    if not path or not Path(path).exists():
        pytest.fail(
            f"{pattern.rsplit('/', 1)[-1]} not built: run `make deploy-check` (it builds it into {TOOLS})"
        )
    return path


def run(cmd: list[str], *, timeout: float = 120, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=kw.pop("cwd", REPO), **kw)


def load_all(path: Path) -> list[dict[str, Any]]:
    with path.open() as f:
        return [doc for doc in yaml.safe_load_all(f) if doc]


def parse_properties(text: str) -> dict[str, str]:
    """``key=value`` lines; comments and blank lines ignored (enough for the files we write)."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        assert sep, f"not a key=value line: {line!r}"
        assert key.strip() not in out, f"key {key.strip()!r} set twice"
        out[key.strip()] = value.strip()
    return out


@pytest.fixture(scope="session")
def helm() -> str:
    return built_tool("HELM_BIN", "helm-*/helm")


@pytest.fixture(scope="session")
def checkov() -> str:
    return built_tool("CHECKOV_BIN", "checkov-*/bin/checkov")
