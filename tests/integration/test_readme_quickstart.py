"""README.md's quick start runs as pasted, and the ordered topic it reads back is in order.

The test takes the shell block under "## Quick start" and runs it with bash, unchanged, in a
scratch copy of what the block uses from the checkout (``deploy/local/kafka.py``, the jars, the
virtualenv): so the block starts **its own local broker** — as a newcomer's would — and the
launcher's state file and log stay in the scratch folder instead of the checkout's
``.cache/kafka``, where a developer's ``make broker-start`` keeps its own. The one thing changed
from a newcomer's run is the environment: ``TIMESYNC_HTTP_PORT`` points the sidecar's HTTP server
at a free port (port 8080 may be taken on a shared machine).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.sidecar_process import free_port

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"

pytestmark = pytest.mark.slow


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block, in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```$", text, flags=re.M | re.S)


def quickstart_block() -> str:
    text = README.read_text()
    start = text.index("\n## Quick start")
    section = text[start : text.index("\n## ", start + 1)]
    (block,) = [body for language, body in code_blocks(section) if language == "sh"]
    return block


def test_readme_opens_with_the_two_set_up_commands() -> None:
    language, body = code_blocks(README.read_text())[0]
    commands = [line.split("#")[0].strip() for line in body.splitlines()]
    assert (language, commands) == ("sh", ["make demo", "make test"])


def test_quickstart_has_the_five_steps_a_newcomer_needs() -> None:
    block = quickstart_block()
    steps = re.findall(r"^# (\d)\. ", block, flags=re.M)
    assert steps == ["1", "2", "3", "4", "5"]
    assert "deploy/local/kafka.py start" in block
    assert "timesync-sidecar" in block
    assert "deploy/local/kafka.py stop" in block


def scratch_checkout(root: Path) -> Path:
    """The parts of the checkout the quick start touches: the launcher (``kafka.py`` and its
    package) is copied (it finds its jars and keeps its state relative to its own path), the jars
    and the venv are linked."""
    (root / "deploy" / "local").mkdir(parents=True)
    shutil.copy(REPO / "deploy" / "local" / "kafka.py", root / "deploy" / "local" / "kafka.py")
    shutil.copytree(
        REPO / "deploy" / "local" / "kafka_launcher",
        root / "deploy" / "local" / "kafka_launcher",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (root / ".cache").mkdir()
    (root / ".cache" / "jars").symlink_to((REPO / ".cache" / "jars").resolve())
    (root / ".venv").symlink_to(Path(sys.prefix))
    return root


def test_quickstart_runs_and_reads_the_records_in_event_time_order(tmp_path: Path) -> None:
    root = scratch_checkout(tmp_path / "checkout")
    script = tmp_path / "quickstart.sh"
    script.write_text(quickstart_block())
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIMESYNC_")}
    env["TIMESYNC_HTTP_PORT"] = str(free_port())
    try:
        result = subprocess.run(
            ["bash", "-eo", "pipefail", str(script)],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:  # never leave a broker behind, whatever happened to the script
        subprocess.run(
            [sys.executable, str(root / "deploy" / "local" / "kafka.py"), "stop"],
            capture_output=True,
            timeout=60,
        )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert re.search(r"^broker at 127\.0\.0\.1:\d+$", result.stdout, flags=re.M), result.stdout
    rows = [line.split(" ", 2) for line in result.stdout.splitlines() if not line.startswith("broker at")]
    values = [value for _, _, value in rows]
    assert values == [f'{{"second": {n}}}' for n in range(1, 7)], result.stdout
    timestamps = [int(ts) for ts, _, _ in rows]
    assert timestamps == sorted(timestamps)
    assert [topic for _, topic, _ in rows] == ["views", "clicks", "views", "clicks", "views", "clicks"]
    assert "stopped cleanly" in result.stderr  # step "Stop both": SIGTERM drained and committed
