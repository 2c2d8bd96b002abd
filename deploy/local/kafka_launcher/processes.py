"""The broker's JVMs as processes: the command line, the start, the signals, the wait for the end.

A process counts as ended once it is gone or a zombie whose every thread has exited (a JVM's
leader shows ``Z`` while its other threads still hold its sockets). Nodes started by another
process (the command line stops a node a test started) are watched through ``/proc``: waiting for
their zombie to vanish would wait on their parent.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from .install import ensure_jars, java


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); reap it if it is ours.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        # Another process's child (a node this command stops that another process started): its
        # zombie has ended all the same, and waiting for it to vanish would wait on its parent.
        return not zombie(pid)
    return done != pid


def zombie(pid: int) -> bool:
    """Whether ``pid`` has exited, every thread of it, and awaits its parent's wait (Linux
    ``/proc``; False elsewhere). The leader of a JVM shows ``Z`` while its other threads still
    exit and hold its sockets: only once it is the last thread left has it let go of its ports."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] == ["Z"] and threads == [str(pid)]


def terminate(pid: int, timeout_s: float) -> None:
    """SIGTERM (SIGKILL at once when ``timeout_s`` is 0, or once it has passed), then wait."""
    if not pid_alive(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM if timeout_s > 0 else signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid):
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10.0
        time.sleep(0.05)


def die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux only: let the kernel end the broker if the process that started it dies."""
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def jvm(java_bin: str, jars: Path, log4j: Path, heap: str) -> list[str]:
    """The command line of a JVM on the broker jars, up to its main class; ``LOCAL_KAFKA_JVM_OPTS``
    adds options (the test suite's brokers take ``-XX:TieredStopAtLevel=1``: a broker that lives
    minutes under light load spends less CPU compiling than it would ever win back)."""
    return [
        java_bin,
        *heap.split(),
        *os.environ.get("LOCAL_KAFKA_JVM_OPTS", "").split(),
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        f"{jars}/*",
    ]


def launch(command: list[str], config: Path, log: Path, tie_to_parent: bool) -> subprocess.Popen[bytes]:
    """Start ``kafka.Kafka`` on ``config`` in its own session; its output goes to ``log``.
    ``tie_to_parent``: the kernel ends it when the thread that started it ends."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            [*command, "kafka.Kafka", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent if tie_to_parent else None,
        )


def spawn(node_dir: Path, log: Path, heap: str, tie_to_parent: bool) -> int:
    """Start a cluster node on its ``server.properties``; its pid."""
    command = jvm(java(), ensure_jars(), node_dir / "log4j2.yaml", heap)
    return launch(command, node_dir / "server.properties", log, tie_to_parent).pid


def log_tail(log_file: str | Path, lines: int = 25) -> str:
    try:
        text = Path(log_file).read_text(errors="replace")
    except OSError:
        return "(no broker log)"
    return "\n".join(text.splitlines()[-lines:])
