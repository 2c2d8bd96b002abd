"""Kafka Streams as a benchmark peer: build its jar on demand, run it, stop it.

The peer (``bench/peers/kafka-streams``, Java) merges the same co-partitioned inputs as timesync
with Kafka Streams' own PartitionGroup and writes task *i*'s order to output partition *i*, with
the ``timesync.source.*`` headers, so the harness can compare the two orders record by record.
The harness measures the merging process itself (CPU seconds, peak RSS from ``/proc/<pid>``), so
the peer is started as a plain ``java`` child whose pid is the JVM's.

    jar = build()
    async with KafkaStreamsPeer(PeerSettings(bootstrap, ["a", "b"], "out", 0, "bench-ks-1")) as peer:
        ...  # peer.pid, peer.ready_after_s
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Literal, Self

from testkit.processes import terminate

PEER_DIR = Path(__file__).resolve().with_name("kafka-streams")
POM = PEER_DIR / "pom.xml"
JAR = PEER_DIR / "target" / "timesync-kafka-streams-peer.jar"

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
STDERR_TAIL_LINES = 40
# A fixed heap cap keeps the peer's RSS comparable between runs and machines: without it the JVM
# sizes its heap from the machine's memory (a quarter of it), and RSS follows the GC's mood.
DEFAULT_JVM_OPTIONS: tuple[str, ...] = ("-Xmx512m", "-XX:+ExitOnOutOfMemoryError")

IdleMs = int | Literal["max"]


class PeerError(RuntimeError):
    """The peer could not be built, started or stopped; the message says why and what to do."""


def _sources() -> list[Path]:
    return [POM, *(p for p in (PEER_DIR / "src").rglob("*") if p.is_file())]


def jar_is_fresh() -> bool:
    """True when the jar exists and is newer than the pom and every source file."""
    if not JAR.is_file():
        return False
    built = JAR.stat().st_mtime
    return all(p.stat().st_mtime <= built for p in _sources())


def java_executable() -> str:
    """``$JAVA_HOME/bin/java`` if set, else ``java`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise PeerError("java not found on PATH: install a Java 17+ runtime or set JAVA_HOME")
    return java


def build(quiet: bool = True) -> Path:
    """Return the peer's jar, running ``mvn package`` only when it is missing or stale.

    A fresh jar is reused as is (a warm call costs a few stat calls), so the harness and the tests
    may call this before every run.
    """
    java_executable()  # fail early and clearly: a jar is useless without a JVM
    if jar_is_fresh():
        return JAR
    # Two processes may ask at once (the quick bench run and the peer's tests on two workers):
    # one builds while the other waits, then finds the jar fresh. Two Maven builds in one
    # target/ would overwrite each other's classes.
    JAR.parent.mkdir(parents=True, exist_ok=True)
    with open(JAR.parent / ".build.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if jar_is_fresh():
            return JAR
        return _package(quiet)


def _package(quiet: bool) -> Path:
    """``mvn package`` of the peer (the caller holds the build lock)."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise PeerError(
            "mvn not found on PATH: install Apache Maven to build the Kafka Streams peer "
            f"({PEER_DIR}; its jars come from Maven Central)"
        )
    cmd = [mvn, "-B", "-f", str(POM), "package"]
    if quiet:
        cmd.insert(1, "-q")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not JAR.is_file():
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
        raise PeerError(
            f"building the Kafka Streams peer failed ({' '.join(cmd)}, exit {proc.returncode}):\n{tail}"
        )
    if not quiet and proc.stdout:
        print(proc.stdout, end="")
    return JAR


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux only: let the kernel stop the JVM if the process that started it dies."""
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _idle_arg(value: IdleMs) -> str:
    if value == "max":
        return "max"
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise ValueError(f"max_task_idle_ms={value!r}: use -1, 0, a positive number of ms, or 'max'")
    return str(value)


@dataclass(frozen=True, slots=True)
class PeerSettings:
    """What the peer runs: its Kafka Streams application.

    ``max_task_idle_ms`` is -1, 0, N or ``"max"``. Use ``"max"`` to wait forever: the peer maps
    it to a value Kafka Streams can add to the wall clock, whereas a literal ``2**63 - 1`` is
    passed through unchanged and overflows Kafka Streams' idle deadline (it then acts like 0).
    ``config`` passes extra Kafka Streams settings (``consumer.``/``producer.`` prefixes work).
    ``warmup_topics``/``warmup_records``: before the measured instance, the JVM drains that many
    records of those topics with the same settings (its JIT warms up); READY comes after that.
    """

    bootstrap: str
    input_topics: Sequence[str]
    output_topic: str
    max_task_idle_ms: IdleMs
    application_id: str
    processing_guarantee: Literal["at_least_once", "exactly_once_v2"] = "at_least_once"
    commit_interval_ms: int = 100
    config: Mapping[str, str] = field(default_factory=dict)
    warmup_topics: Sequence[str] = ()
    warmup_records: int = 0

    def arguments(self) -> list[str]:
        """The peer's command-line arguments (after ``java ... -jar JAR``)."""
        if not self.input_topics:
            raise ValueError("input_topics is empty: the peer needs at least one topic to merge")
        argv = [
            "--bootstrap-servers",
            self.bootstrap,
            "--input-topics",
            ",".join(self.input_topics),
            "--output-topic",
            self.output_topic,
            "--application-id",
            self.application_id,
            "--max-task-idle-ms",
            _idle_arg(self.max_task_idle_ms),
            "--processing-guarantee",
            self.processing_guarantee,
            "--commit-interval-ms",
            str(self.commit_interval_ms),
        ]
        for key, value in self.config.items():
            argv += ["--config", f"{key}={value}"]
        if self.warmup_topics and self.warmup_records > 0:
            argv += [
                "--warmup-topics",
                ",".join(self.warmup_topics),
                "--warmup-records",
                str(self.warmup_records),
            ]
        return argv


@dataclass(frozen=True, slots=True)
class PeerProcess:
    """How the peer's JVM runs: its options, how long it may take to be ready and to stop, and
    its jar (default: the one :func:`build` makes)."""

    jvm_options: Sequence[str] = DEFAULT_JVM_OPTIONS
    ready_timeout_s: float = READY_TIMEOUT_S
    stop_timeout_s: float = STOP_TIMEOUT_S
    jar: Path | None = None


class KafkaStreamsPeer:
    """One running Kafka Streams peer process; use as ``async with`` or call start()/stop().

    ``settings``: the application it runs (:class:`PeerSettings`); ``process``: how its JVM runs
    (:class:`PeerProcess`, default its defaults).
    """

    def __init__(self, settings: PeerSettings, process: PeerProcess | None = None) -> None:
        process = process or PeerProcess()
        arguments = settings.arguments()
        self.settings = settings
        self.jar = process.jar or JAR
        self.argv = [java_executable(), *process.jvm_options, "-jar", str(self.jar), *arguments]
        self.ready_timeout_s = process.ready_timeout_s
        self.stop_timeout_s = process.stop_timeout_s
        self.ready_after_s: float | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._readers: list[asyncio.Task[None]] = []

    @property
    def pid(self) -> int:
        """The JVM's pid (for /proc/<pid>/stat and /proc/<pid>/status)."""
        if self._proc is None:
            raise PeerError("the Kafka Streams peer was not started")
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.returncode

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr) or "(nothing on stderr)"

    async def start(self) -> None:
        """Start the JVM and return once it printed READY (its Kafka Streams instance is RUNNING).

        Raises PeerError with the tail of its stderr if it exits first or is not ready within
        ``ready_timeout_s``; the process is stopped in both cases.
        """
        if not self.jar.is_file():
            raise PeerError(f"the peer jar {self.jar} is missing: call build() first")
        started = time.monotonic()
        self._proc = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            preexec_fn=_die_with_parent,
        )
        assert self._proc.stdout is not None
        assert self._proc.stderr is not None
        self._readers.append(asyncio.create_task(self._drain_stderr(self._proc.stderr)))
        try:
            await asyncio.wait_for(self._wait_ready(self._proc.stdout), self.ready_timeout_s)
        except TimeoutError:
            await self._terminate(timeout_s=5.0)
            raise PeerError(
                f"the Kafka Streams peer printed no READY within {self.ready_timeout_s:g} s "
                f"(is the broker up?); its stderr:\n{self.stderr_tail()}"
            ) from None
        except PeerError:
            await self._terminate(timeout_s=5.0)
            raise
        self.ready_after_s = time.monotonic() - started
        self._readers.append(asyncio.create_task(self._drain(self._proc.stdout)))

    async def _wait_ready(self, stdout: asyncio.StreamReader) -> None:
        while True:
            line = await stdout.readline()
            if not line:
                assert self._proc is not None
                code = await self._proc.wait()
                await asyncio.sleep(0.1)  # let the stderr reader catch the last lines
                raise PeerError(
                    f"the Kafka Streams peer exited with code {code} before READY; its stderr:\n"
                    f"{self.stderr_tail()}"
                )
            if line.strip() == b"READY":
                return

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        async for line in stream:
            self._stderr.append(line.decode(errors="replace").rstrip())

    @staticmethod
    async def _drain(stream: asyncio.StreamReader) -> None:
        async for _ in stream:
            pass

    async def stop(self) -> int:
        """SIGTERM (the peer closes Kafka Streams and exits 0), SIGKILL after ``stop_timeout_s``.

        Returns the exit code (negative: killed by that signal).
        """
        if self._proc is None:
            return 0
        return await self._terminate(self.stop_timeout_s)

    async def _terminate(self, timeout_s: float) -> int:
        assert self._proc is not None
        proc = self._proc
        await terminate(proc, timeout_s)
        for task in self._readers:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(task, 5.0)
        self._readers.clear()
        assert proc.returncode is not None
        return proc.returncode

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
