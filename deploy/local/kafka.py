#!/usr/bin/env python3
"""Run a real single-node Apache Kafka (KRaft, combined broker + controller) from Maven jars.

The demo, the tests and the benchmark all need a broker that behaves exactly like production
Kafka (LogAppendTime, idempotent and transactional producers, consumer groups), on a machine
without a Docker engine. This launcher starts one from the jars that
``mvn -f deploy/local/pom.xml dependency:copy-dependencies`` puts in ``.cache/jars/broker``.

Standard library only, so it runs before any virtualenv exists.

    python deploy/local/kafka.py start [--port N] [--data-dir DIR] [--override k=v ...]
    python deploy/local/kafka.py status
    python deploy/local/kafka.py stop

``start`` prints the bootstrap address (``127.0.0.1:PORT``) once the broker answers a metadata
request. Without ``--data-dir`` the data lives in a temporary folder that ``stop`` removes; with
it, the data and the port survive a stop, so a restart brings back the same broker (the
reliability tests restart a broker under a running sidecar this way).

Importable: ``start_broker(...)`` returns a :class:`Broker` whose ``stop()`` ends it.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
POM = REPO / "deploy" / "local" / "pom.xml"
JARS = REPO / ".cache" / "jars" / "broker"
RUN_DIR = REPO / ".cache" / "kafka"
STATE_FILE = RUN_DIR / "broker.json"
PORT_FILE_NAME = "timesync-ports.json"  # inside a kept data dir: a restart reuses the ports
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
HEAP = os.environ.get("KAFKA_HEAP_OPTS", "-Xms256m -Xmx768m")

LOG4J2 = """\
Configuration:
  status: warn
  Appenders:
    File:
      name: file
      fileName: "{log}"
      append: true
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: file
    Logger:
      - name: kafka.request.logger
        level: WARN
      - name: org.apache.kafka.controller
        level: INFO
"""


class LauncherError(RuntimeError):
    """A problem the user can fix; the CLI prints it as one line and exits 1."""


@dataclasses.dataclass
class Broker:
    """A running local broker. ``stop()`` ends it and, if its data was temporary, removes it."""

    pid: int
    port: int
    controller_port: int
    data_dir: str
    temporary: bool
    log_file: str

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return _pid_alive(self.pid)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Send SIGTERM, wait for the process to exit (SIGKILL after ``timeout_s``), clean up."""
        _terminate(self.pid, timeout_s)
        if self.temporary:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def kill(self) -> None:
        """End the broker abruptly (SIGKILL), keeping its data: a crash, for fault tests."""
        _terminate(self.pid, 0.0)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); reap it if it is ours.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return True


def _terminate(pid: int, timeout_s: float) -> None:
    if not _pid_alive(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM if timeout_s > 0 else signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while _pid_alive(pid):
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10.0
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _check_port_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            raise LauncherError(
                f"port 127.0.0.1:{port} is busy ({e.strerror}); pick another with --port"
            ) from None


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


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise LauncherError("java not found on PATH: install a Java 17+ runtime or set JAVA_HOME")
    return java


def _cluster_id() -> str:
    """Kafka's cluster id format: a UUID as 22 characters of URL-safe base64.

    One in 64 such ids starts with '-', which the storage tool's argument parser takes for an
    option; draw again in that case.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _server_properties(port: int, controller_port: int, data_dir: Path, overrides: Mapping[str, str]) -> str:
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir / "log"),
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        # Single node: every internal topic has one replica, and few partitions so that the
        # first consumer group or transaction does not wait for 50 partitions to be created.
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # Tests and benchmarks replay fixed, old event times as CreateTime; keep them.
        "log.retention.ms": "-1",
    }
    props.update(overrides)
    return "".join(f"{k}={v}\n" for k, v in props.items())


def _metadata_request(correlation_id: int) -> bytes:
    """A Metadata v4 request for no topics: enough to learn the broker is registered and serving."""
    client_id = b"timesync-launcher"
    header = struct.pack(">hhih", 3, 4, correlation_id, len(client_id)) + client_id
    body = struct.pack(">i?", 0, False)  # topics: empty array; allow_auto_topic_creation: false
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def broker_answers(port: int, timeout_s: float = 2.0) -> bool:
    """True if 127.0.0.1:port answers a Metadata request listing at least one broker."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
            s.sendall(_metadata_request(7))
            size_bytes = _recv_exact(s, 4)
            (size,) = struct.unpack(">i", size_bytes)
            body = _recv_exact(s, size)
    except OSError:
        return False
    if len(body) < 12:
        return False
    correlation_id, _throttle, n_brokers = struct.unpack(">iii", body[:12])
    return correlation_id == 7 and n_brokers >= 1


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return bytes(buf)


def log_tail(log_file: str | Path, lines: int = 25) -> str:
    try:
        text = Path(log_file).read_text(errors="replace")
    except OSError:
        return "(no broker log)"
    return "\n".join(text.splitlines()[-lines:])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux only: let the kernel end the broker if the process that started it dies."""
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def start_broker(
    port: int | None = None,
    data_dir: str | Path | None = None,
    log_file: str | Path | None = None,
    overrides: Mapping[str, str] | None = None,
    timeout_s: float = START_TIMEOUT_S,
    die_with_parent: bool = False,
    controller_port: int | None = None,
) -> Broker:
    """Format storage if needed, start the broker, return once it answers a metadata request.

    ``die_with_parent`` ties the broker's life to the calling process (tests use it so that an
    interrupted test run leaves no JVM behind).
    """
    java = _java()
    temporary = data_dir is None
    data = Path(tempfile.mkdtemp(prefix="timesync-kafka-")) if data_dir is None else Path(data_dir).resolve()
    data.mkdir(parents=True, exist_ok=True)
    try:
        port_file = data / PORT_FILE_NAME
        kept: dict[str, int] = {}
        if not temporary and port_file.exists():
            kept = json.loads(port_file.read_text())
        port = port or kept.get("port") or free_port()
        controller_port = controller_port or kept.get("controller_port") or free_port()
        while controller_port == port:
            controller_port = free_port()
        _check_port_free(port)
        _check_port_free(controller_port)
        jars = ensure_jars()
        port_file.write_text(json.dumps({"port": port, "controller_port": controller_port}))

        log = Path(log_file) if log_file else data / "server.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        config = data / "server.properties"
        config.write_text(_server_properties(port, controller_port, data, overrides or {}))
        log4j = data / "log4j2.yaml"
        log4j.write_text(LOG4J2.format(log=str(log).replace("\\", "/")))

        classpath = f"{jars}/*"
        jvm = [
            java,
            *HEAP.split(),
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            classpath,
        ]
        if not (data / "log" / "meta.properties").exists():
            fmt = subprocess.run(
                [*jvm, "kafka.tools.StorageTool", "format", "-t", _cluster_id(), "-c", str(config), "-g"],
                capture_output=True,
                text=True,
            )
            if fmt.returncode != 0:
                raise LauncherError(
                    f"formatting KRaft storage failed (exit {fmt.returncode}): "
                    f"{(fmt.stdout + fmt.stderr).strip()[-2000:]}"
                )

        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [*jvm, "kafka.Kafka", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent if die_with_parent else None,
            )
        broker = Broker(proc.pid, port, controller_port, str(data), temporary, str(log))
        deadline = time.monotonic() + timeout_s
        while not broker_answers(port):
            if proc.poll() is not None:
                raise LauncherError(
                    f"the Kafka broker exited with code {proc.returncode} while starting; "
                    f"log {log}:\n{log_tail(log)}"
                )
            if time.monotonic() > deadline:
                broker.stop(timeout_s=5)
                raise LauncherError(
                    f"the Kafka broker did not answer on {broker.bootstrap} within "
                    f"{timeout_s:g} s; log {log}:\n{log_tail(log)}"
                )
            time.sleep(0.2)
        return broker
    except BaseException:
        if temporary:
            shutil.rmtree(data, ignore_errors=True)
        raise


def _load_state(state_file: Path) -> Broker | None:
    try:
        return Broker(**json.loads(state_file.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafka.py", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--state",
        type=Path,
        default=STATE_FILE,
        help=f"where start records the broker for stop/status (default {STATE_FILE})",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start the broker and print its bootstrap address")
    start.add_argument("--port", type=int, help="client port on 127.0.0.1 (default: a free one)")
    start.add_argument(
        "--data-dir", help="keep data here across stop/start (default: a temp dir removed on stop)"
    )
    start.add_argument("--log-file", help=f"broker log (default: {RUN_DIR / 'broker.log'})")
    start.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra server.properties setting; repeatable",
    )
    start.add_argument(
        "--timeout", type=float, default=START_TIMEOUT_S, help="seconds to wait for the broker"
    )
    sub.add_parser("stop", help="stop the broker started by 'start' and wait for it to exit")
    sub.add_parser("status", help="print the bootstrap address if the broker is up (exit 1 if not)")
    args = parser.parse_args(argv)

    try:
        if args.command == "start":
            running = _load_state(args.state)
            if running and running.alive():
                raise LauncherError(
                    f"a broker started from here is already running on {running.bootstrap} "
                    f"(pid {running.pid}); run 'kafka.py stop' first"
                )
            overrides = {}
            for item in args.override:
                key, sep, value = item.partition("=")
                if not sep or not key:
                    raise LauncherError(f"--override expects KEY=VALUE, got {item!r}")
                overrides[key.strip()] = value.strip()
            t0 = time.monotonic()
            log_file = args.log_file or RUN_DIR / "broker.log"
            broker = start_broker(args.port, args.data_dir, log_file, overrides, args.timeout)
            args.state.parent.mkdir(parents=True, exist_ok=True)
            args.state.write_text(json.dumps(dataclasses.asdict(broker)))
            print(broker.bootstrap)
            print(
                f"kafka: up in {time.monotonic() - t0:.1f} s (pid {broker.pid}, log {broker.log_file})",
                file=sys.stderr,
            )
        elif args.command == "stop":
            broker = _load_state(args.state)
            if broker is None:
                print("kafka: no broker recorded; nothing to stop", file=sys.stderr)
                return 0
            broker.stop()
            args.state.unlink(missing_ok=True)
            print(f"kafka: stopped pid {broker.pid}", file=sys.stderr)
        else:
            broker = _load_state(args.state)
            if broker is None or not broker.alive() or not broker_answers(broker.port):
                print("kafka: not running", file=sys.stderr)
                return 1
            print(broker.bootstrap)
    except LauncherError as e:
        print(f"kafka: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
