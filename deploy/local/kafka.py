#!/usr/bin/env python3
"""Run a real single-node Apache Kafka (KRaft, combined broker + controller) from Maven jars.

The demo, the tests and the benchmark all need a broker that behaves exactly like production
Kafka (LogAppendTime, idempotent and transactional producers, consumer groups), on a machine
without a Docker engine. This launcher starts one from the jars that
``mvn -f deploy/local/pom.xml dependency:copy-dependencies`` puts in ``.cache/jars/broker``.

Standard library only, so it runs before any virtualenv exists.

    python deploy/local/kafka.py start [--port N] [--data-dir DIR] [--override k=v ...]
                                       [--scram-user NAME=PASSWORD ...]
                                       [--ssl-cafile CA --ssl-certfile CERT --ssl-keyfile KEY]
    python deploy/local/kafka.py status
    python deploy/local/kafka.py stop

    python deploy/local/kafka.py start --nodes 3 [--data-dir DIR] [--override k=v ...]
    python deploy/local/kafka.py stop --node ID | start --node ID | kill --node ID

``start --nodes 3`` starts a cluster of three combined (broker + controller) KRaft nodes, each
with its own ports and ``node-<id>`` data folder, topics replicated 3 times with
``min.insync.replicas=2``; it prints every node's address on one line (the bootstrap), then
``node ID ADDRESS up|down`` per node. One node at a time can then be stopped cleanly, killed
(SIGKILL) and started again; ``stop`` without ``--node`` ends the cluster.

``start`` prints the bootstrap address (``127.0.0.1:PORT``) once the broker answers a metadata
request. Without ``--data-dir`` the data lives in a temporary folder that ``stop`` removes; with
it, the data and the ports survive a stop, so a restart brings back the same broker (the
reliability tests restart a broker under a running sidecar this way).

Secure listeners are opt-in, each on its own free 127.0.0.1 port, next to the PLAINTEXT one
(which stays, as do the PLAINTEXT inter-broker and controller listeners):

- ``--scram-user`` (repeatable) adds a ``SASL_PLAINTEXT`` listener with SCRAM-SHA-512 and
  SCRAM-SHA-256; the users are written into the metadata log when storage is first formatted.
- ``--ssl-*`` adds an ``SSL`` listener (client certificates optional, verified when sent) and an
  ``MTLS`` listener (also protocol SSL, client certificate required), from PEM files.

``start`` then prints one more line per listener, ``NAME 127.0.0.1:PORT``, after the bootstrap.

Importable: ``start_broker(...)`` returns a :class:`Broker` whose ``stop()`` ends it;
``start_cluster(3, ...)`` a :class:`Cluster` with ``stop_node``/``kill_node``/``start_node``.
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
SCRAM_FILE_NAME = "timesync-scram-users.json"  # inside a data dir: the users formatted into it
SCRAM_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
HEAP = os.environ.get("KAFKA_HEAP_OPTS", "-Xms256m -Xmx768m")
#: A node of the three-node cluster: three of these and a sidecar fit 2 cores and 24 GiB with
#: room to spare (the fault tests' 200,000 records need far less than the maximum).
CLUSTER_HEAP = os.environ.get("KAFKA_CLUSTER_HEAP_OPTS", "-Xms128m -Xmx512m")
CLUSTER_FILE_NAME = "timesync-cluster.json"  # inside a cluster's data dir: its id and ports
CLUSTER_REPLICATION = 3
CLUSTER_MIN_ISR = 2

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


@dataclasses.dataclass(frozen=True)
class SslFiles:
    """PEM files for the broker's ``SSL`` and ``MTLS`` listeners.

    ``keyfile`` must be PKCS#8 ("BEGIN PRIVATE KEY", or "BEGIN ENCRYPTED PRIVATE KEY" with
    ``key_password``): Kafka reads no other key format. Java 17 cannot decrypt PBES2-encrypted
    keys (the default of ``openssl pkcs8 -topk8``); leave the key unencrypted, or encrypt it with
    ``openssl pkcs8 -topk8 -v1 PBE-SHA1-3DES``. ``certfile`` is the chain, leaf first; its subject
    alternative names must include ``IP:127.0.0.1`` for clients that check the host name.
    ``cafile`` holds the certificates trusted to sign client certificates.
    """

    cafile: str | Path
    certfile: str | Path
    keyfile: str | Path
    key_password: str | None = None


@dataclasses.dataclass
class Broker:
    """A running local broker. ``stop()`` ends it and, if its data was temporary, removes it."""

    pid: int
    port: int
    controller_port: int
    data_dir: str
    temporary: bool
    log_file: str
    sasl_port: int | None = None
    ssl_port: int | None = None
    mtls_port: int | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        """The SASL_PLAINTEXT (SCRAM-SHA-512/256) listener; only with ``scram_users``."""
        return self._address("SASL_PLAINTEXT", self.sasl_port, "scram_users (CLI: --scram-user)")

    @property
    def ssl_bootstrap(self) -> str:
        """The SSL listener: client certificates optional, verified when sent; only with ``ssl``."""
        return self._address("SSL", self.ssl_port, "ssl=SslFiles(...) (CLI: --ssl-*)")

    @property
    def mtls_bootstrap(self) -> str:
        """The MTLS listener (protocol SSL): a client certificate is required; only with ``ssl``."""
        return self._address("MTLS", self.mtls_port, "ssl=SslFiles(...) (CLI: --ssl-*)")

    def listeners(self) -> dict[str, str]:
        """Every client listener, name → ``127.0.0.1:PORT``, PLAINTEXT first."""
        named = {"SASL_PLAINTEXT": self.sasl_port, "SSL": self.ssl_port, "MTLS": self.mtls_port}
        return {"PLAINTEXT": self.bootstrap} | {
            name: f"127.0.0.1:{port}" for name, port in named.items() if port is not None
        }

    def _address(self, listener: str, port: int | None, how: str) -> str:
        if port is None:
            raise LauncherError(
                f"the broker on {self.bootstrap} has no {listener} listener: start it with {how}"
            )
        return f"127.0.0.1:{port}"

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
    # A zombie still answers kill(0); reap it if it is ours.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        # Another process's child (a node this command stops that another process started): its
        # zombie has ended all the same, and waiting for it to vanish would wait on its parent.
        return not _zombie(pid)
    return done != pid


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has exited, every thread of it, and awaits its parent's wait (Linux
    ``/proc``; False elsewhere). The leader of a JVM shows ``Z`` while its other threads still
    exit and hold its sockets: only once it is the last thread left has it let go of its ports."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] == ["Z"] and threads == [str(pid)]


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
    """Fail if something listens on the port. Connections the broker closed a moment ago linger in
    TIME_WAIT on its ports; they do not stop a listener with SO_REUSEADDR (the broker's, as Java
    sets it), so they must not stop a restart on the same ports either."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
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


def _server_properties(
    port: int,
    controller_port: int,
    data_dir: Path,
    overrides: Mapping[str, str],
    listeners: Sequence[tuple[str, str, int]] = (),
    security: Mapping[str, str] | None = None,
    node_id: int = 1,
    voters: str | None = None,
    replicated: bool = False,
) -> str:
    """``listeners`` are extra client listeners (name, security protocol, port) next to PLAINTEXT;
    ``security`` their settings. ``overrides`` win over everything.

    One node of a cluster gives its ``node_id``, the cluster's ``voters``
    (``id@127.0.0.1:port,...``) and ``replicated=True``: replication 3 and ``min.insync.replicas=2``
    for the cluster's topics and its internal ones, where a single node has 1 and 1."""
    client = [("PLAINTEXT", "PLAINTEXT", port), *listeners]
    advertised = ",".join(f"{name}://127.0.0.1:{p}" for name, _, p in client)
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": voters or f"{node_id}@127.0.0.1:{controller_port}",
        "listeners": f"{advertised},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": advertised,
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": ",".join(
            [*(f"{name}:{protocol}" for name, protocol, _ in client), "CONTROLLER:PLAINTEXT"]
        ),
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
    if replicated:
        # What a production cluster runs with: every partition on three brokers, and a write
        # acknowledged (acks=all) only once two of them have it, so one broker may be away.
        props |= {
            "default.replication.factor": str(CLUSTER_REPLICATION),
            "min.insync.replicas": str(CLUSTER_MIN_ISR),
            "offsets.topic.replication.factor": str(CLUSTER_REPLICATION),
            "transaction.state.log.replication.factor": str(CLUSTER_REPLICATION),
            "transaction.state.log.min.isr": str(CLUSTER_MIN_ISR),
            "share.coordinator.state.topic.replication.factor": str(CLUSTER_REPLICATION),
            "share.coordinator.state.topic.min.isr": str(CLUSTER_MIN_ISR),
        }
    props.update(security or {})
    props.update(overrides)
    return "".join(f"{k}={v}\n" for k, v in props.items())


def _scram_format_args(users: Mapping[str, str]) -> list[str]:
    """The storage tool's ``--add-scram`` arguments: each user, for each SCRAM mechanism.

    The tool splits the bracketed list on commas before it looks at quotes, so a name or password
    cannot contain one; values are always quoted (the tool strips one pair), so '=' and ']' are
    safe.
    """
    args: list[str] = []
    for name, password in users.items():
        if not name or "," in name or "," in password:
            raise LauncherError(
                f"SCRAM user {name!r}: the name must be non-empty, and neither the name nor the "
                "password may contain ',' (Kafka's storage tool splits on it)"
            )
        for mechanism in SCRAM_MECHANISMS:
            args += ["--add-scram", f'{mechanism}=[name="{name}",password="{password}"]']
    return args


def _sasl_properties() -> dict[str, str]:
    """SCRAM on the SASL_PLAINTEXT listener; the credentials live in the KRaft metadata log."""
    props = {"sasl.enabled.mechanisms": ",".join(SCRAM_MECHANISMS)}
    for mechanism in SCRAM_MECHANISMS:
        props[f"listener.name.sasl_plaintext.{mechanism.lower()}.sasl.jaas.config"] = SCRAM_LOGIN
    return props


def _ssl_properties(files: SslFiles, data_dir: Path) -> dict[str, str]:
    """PEM key and trust stores for the SSL and MTLS listeners.

    Kafka's file-based PEM keystore is one file holding the key and then the chain; it is
    assembled from ``keyfile`` and ``certfile`` into the data dir at every start.
    """
    paths = {}
    for what in ("cafile", "certfile", "keyfile"):
        path = Path(getattr(files, what)).resolve()
        if not path.is_file():
            raise LauncherError(f"SSL {what} {path} does not exist; give a PEM file")
        paths[what] = path
    key = paths["keyfile"].read_text()
    for legacy in ("RSA PRIVATE KEY", "EC PRIVATE KEY", "DSA PRIVATE KEY"):
        if f"BEGIN {legacy}" in key:
            raise LauncherError(
                f"SSL keyfile {paths['keyfile']} is a '{legacy}' (PKCS#1/SEC1) key, which Kafka "
                "cannot read; convert it to PKCS#8 with 'openssl pkcs8 -topk8 -nocrypt'"
            )
    if "PRIVATE KEY" not in key:
        raise LauncherError(f"SSL keyfile {paths['keyfile']} holds no PEM private key")
    keystore = data_dir / "ssl-keystore.pem"
    keystore.touch(mode=0o600)
    keystore.write_text(key.rstrip("\n") + "\n" + paths["certfile"].read_text())
    props = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(paths["cafile"]),
        "listener.name.ssl.ssl.client.auth": "requested",
        "listener.name.mtls.ssl.client.auth": "required",
    }
    if files.key_password is not None:
        props["ssl.key.password"] = files.key_password
    return props


def _assign_ports(wanted: Mapping[str, int | None], kept: Mapping[str, int]) -> dict[str, int]:
    """A distinct port per name: the one asked for, else the one a kept data dir recorded, else a
    free one. Ports are checked free by the caller."""
    ports: dict[str, int] = {}
    for name, asked in wanted.items():
        port = asked or kept.get(name) or free_port()
        while port in ports.values():
            port = free_port()
        ports[name] = port
    return ports


def _check_scram_users_formatted(data_dir: Path, users: Mapping[str, str]) -> None:
    """SCRAM users are added only when storage is formatted: refuse users a kept dir lacks."""
    try:
        formatted = set(json.loads((data_dir / SCRAM_FILE_NAME).read_text()))
    except (OSError, ValueError):
        formatted = set()
    missing = sorted(set(users) - formatted)
    if missing:
        raise LauncherError(
            f"data dir {data_dir} was formatted without SCRAM user(s) {', '.join(missing)} "
            f"(it has: {', '.join(sorted(formatted)) or 'none'}); users are added only when "
            "storage is first formatted: use a new --data-dir"
        )


def _port_accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def _metadata_request(correlation_id: int) -> bytes:
    """A Metadata v4 request for no topics: enough to learn the broker is registered and serving."""
    client_id = b"timesync-launcher"
    header = struct.pack(">hhih", 3, 4, correlation_id, len(client_id)) + client_id
    body = struct.pack(">i?", 0, False)  # topics: empty array; allow_auto_topic_creation: false
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def broker_answers(port: int, timeout_s: float = 2.0, brokers: int = 1) -> bool:
    """True if 127.0.0.1:port answers a Metadata request listing at least ``brokers`` brokers
    (a cluster's metadata lists only the brokers that are registered and not fenced)."""
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
    return correlation_id == 7 and n_brokers >= brokers


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
    scram_users: Mapping[str, str] | None = None,
    ssl: SslFiles | None = None,
) -> Broker:
    """Format storage if needed, start the broker, return once it answers a metadata request.

    ``die_with_parent`` ties the broker's life to the calling process (tests use it so that an
    interrupted test run leaves no JVM behind).

    ``scram_users`` (name → password) adds a SASL_PLAINTEXT listener with SCRAM-SHA-512 and
    SCRAM-SHA-256 (``Broker.sasl_bootstrap``). The users are written when storage is formatted,
    so a kept ``data_dir`` keeps the users (and passwords) of its first start; asking it for a
    user it was not formatted with is an error. ``ssl`` adds the SSL listener
    (``Broker.ssl_bootstrap``) and the MTLS listener that requires a client certificate
    (``Broker.mtls_bootstrap``).
    """
    java = _java()
    temporary = data_dir is None
    data = Path(tempfile.mkdtemp(prefix="timesync-kafka-")) if data_dir is None else Path(data_dir).resolve()
    data.mkdir(parents=True, exist_ok=True)
    try:
        scram_args = _scram_format_args(scram_users or {})  # checks the users before anything runs
        port_file = data / PORT_FILE_NAME
        kept: dict[str, int] = {}
        if not temporary and port_file.exists():
            kept = json.loads(port_file.read_text())
        wanted: dict[str, int | None] = {"port": port, "controller_port": controller_port}
        if scram_users:
            wanted["sasl_port"] = None
        if ssl is not None:
            wanted |= {"ssl_port": None, "mtls_port": None}
        ports = _assign_ports(wanted, kept)
        for p in ports.values():
            _check_port_free(p)
        port, controller_port = ports["port"], ports["controller_port"]
        jars = ensure_jars()
        port_file.write_text(json.dumps(kept | ports))

        formatted = (data / "log" / "meta.properties").exists()
        if scram_users and formatted:
            _check_scram_users_formatted(data, scram_users)
        listeners: list[tuple[str, str, int]] = []
        security: dict[str, str] = {}
        if scram_users:
            listeners.append(("SASL_PLAINTEXT", "SASL_PLAINTEXT", ports["sasl_port"]))
            security |= _sasl_properties()
        if ssl is not None:
            listeners += [("SSL", "SSL", ports["ssl_port"]), ("MTLS", "SSL", ports["mtls_port"])]
            security |= _ssl_properties(ssl, data)

        log = Path(log_file) if log_file else data / "server.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        config = data / "server.properties"
        config.touch(mode=0o600)  # may hold ssl.key.password
        config.write_text(
            _server_properties(port, controller_port, data, overrides or {}, listeners, security)
        )
        log4j = data / "log4j2.yaml"
        log4j.write_text(LOG4J2.format(log=str(log).replace("\\", "/")))

        jvm = _jvm(java, jars, log4j, HEAP)
        if not formatted:
            fmt = subprocess.run(
                [
                    *jvm,
                    "kafka.tools.StorageTool",
                    "format",
                    "-t",
                    _cluster_id(),
                    "-c",
                    str(config),
                    "-g",
                    *scram_args,
                ],
                capture_output=True,
                text=True,
            )
            if fmt.returncode != 0:
                # The tool echoes no passwords, but keep them out of the message regardless.
                output = (fmt.stdout + fmt.stderr).strip()[-2000:]
                for password in (scram_users or {}).values():
                    if password:
                        output = output.replace(password, "***")
                raise LauncherError(f"formatting KRaft storage failed (exit {fmt.returncode}): {output}")
            (data / SCRAM_FILE_NAME).write_text(json.dumps(sorted(scram_users or {})))

        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [*jvm, "kafka.Kafka", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent if die_with_parent else None,
            )
        broker = Broker(
            proc.pid,
            port,
            controller_port,
            str(data),
            temporary,
            str(log),
            sasl_port=ports.get("sasl_port"),
            ssl_port=ports.get("ssl_port"),
            mtls_port=ports.get("mtls_port"),
        )
        deadline = time.monotonic() + timeout_s
        # The PLAINTEXT listener answering means the broker has registered and serves; the other
        # listeners open with it, but wait until each accepts a connection before saying so.
        extra_ports = [p for name, p in ports.items() if name not in {"port", "controller_port"}]
        while not (broker_answers(port) and all(_port_accepts(p) for p in extra_ports)):
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


# --- A three-node cluster -----------------------------------------------------------------------
#
# Three combined (broker + controller) nodes rather than one controller and three brokers: the
# controller quorum then has three voters too, so any one node may stop or crash and the cluster
# still elects leaders and fences the missing broker — as in production, where the controllers
# are never a single point of failure. It is also one JVM fewer on a small machine.


@dataclasses.dataclass
class Node:
    """One node of a local cluster; ``pid`` is ``None`` while it is stopped."""

    node_id: int
    port: int
    controller_port: int
    data_dir: str
    log_file: str
    pid: int | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.pid is not None and _pid_alive(self.pid)


@dataclasses.dataclass
class Cluster:
    """A running local cluster of combined KRaft nodes (``start_cluster``).

    Any node may be stopped (``stop_node``: SIGTERM, Kafka's controlled shutdown moves its
    leaders away first), killed (``kill_node``: SIGKILL, a crash) and started again
    (``start_node``) on its own data dir and ports. ``stop()`` ends them all and, if the data was
    temporary, removes it.
    """

    nodes: list[Node]
    data_dir: str
    temporary: bool
    die_with_parent: bool = False

    @property
    def bootstrap(self) -> str:
        """Every node's address, comma-separated: clients find the cluster through any live one."""
        return ",".join(node.bootstrap for node in self.nodes)

    def node(self, node_id: int) -> Node:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        ids = ", ".join(str(n.node_id) for n in self.nodes)
        raise LauncherError(f"the cluster has no node {node_id} (its nodes: {ids})")

    def alive(self) -> bool:
        return any(node.alive() for node in self.nodes)

    def stop_node(self, node_id: int, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """A clean stop (SIGTERM; SIGKILL after ``timeout_s``); the node's data stays."""
        self.stop_nodes([node_id], timeout_s)

    def kill_node(self, node_id: int) -> None:
        """``kill -9``: the node crashes; its data stays."""
        self.stop_nodes([node_id], 0.0)

    def stop_nodes(self, node_ids: Sequence[int], timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Signal the nodes together, then wait for each (SIGKILL past ``timeout_s``; 0: at once).

        Together, because the last node of a cluster stopped one at a time has no controller
        quorum left to acknowledge its controlled shutdown, and would wait out ``timeout_s``.
        """
        nodes = [self.node(i) for i in node_ids]
        for node in nodes:
            if node.alive():
                assert node.pid is not None
                with contextlib.suppress(ProcessLookupError):
                    os.kill(node.pid, signal.SIGTERM if timeout_s > 0 else signal.SIGKILL)
        for node in nodes:
            if node.pid is not None:
                _terminate(node.pid, timeout_s)
            node.pid = None

    def start_node(self, node_id: int, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start a stopped node again; return once it serves and the cluster counts it live."""
        self.start_nodes([node_id], timeout_s)

    def start_nodes(self, node_ids: Sequence[int], timeout_s: float = START_TIMEOUT_S) -> None:
        for node_id in node_ids:
            self.spawn_node(node_id)
        self.wait_ready(node_ids, timeout_s)

    def spawn_node(self, node_id: int) -> None:
        """Start a stopped node's process and return at once (``wait_ready`` waits for it).

        Split from the wait so that an asyncio test spawns from its own thread and waits in
        another: with ``die_with_parent`` the kernel signals the broker when the *thread* that
        spawned it ends, and asyncio's worker threads end with the event loop.
        """
        node = self.node(node_id)
        if node.alive():
            raise LauncherError(f"node {node_id} is already running (pid {node.pid})")
        for port in (node.port, node.controller_port):
            _check_port_free(port)
        node.pid = _spawn(Path(node.data_dir), Path(node.log_file), CLUSTER_HEAP, self.die_with_parent)

    def wait_ready(self, node_ids: Sequence[int], timeout_s: float = START_TIMEOUT_S) -> None:
        """Until each node serves and its metadata lists every running node (it has registered
        and is not fenced); fails with the node's log if it exits or ``timeout_s`` passes."""
        deadline = time.monotonic() + timeout_s
        nodes = [self.node(i) for i in node_ids]
        while True:
            running = sum(1 for n in self.nodes if n.alive())
            pending = [n for n in nodes if not broker_answers(n.port, brokers=running)]
            if not pending:
                return
            for node in pending:
                if not node.alive():
                    raise LauncherError(
                        f"Kafka node {node.node_id} exited while starting; log {node.log_file}:\n"
                        f"{log_tail(node.log_file)}"
                    )
            if time.monotonic() > deadline:
                node = pending[0]
                raise LauncherError(
                    f"Kafka node {node.node_id} did not serve on {node.bootstrap} with {running} "
                    f"nodes registered within {timeout_s:g} s; log {node.log_file}:\n"
                    f"{log_tail(node.log_file)}"
                )
            time.sleep(0.2)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Stop every node, then remove the data if it was temporary."""
        self.stop_nodes([n.node_id for n in self.nodes], timeout_s)
        if self.temporary:
            shutil.rmtree(self.data_dir, ignore_errors=True)


def _jvm(java: str, jars: Path, log4j: Path, heap: str) -> list[str]:
    return [
        java,
        *heap.split(),
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        f"{jars}/*",
    ]


def _spawn(node_dir: Path, log: Path, heap: str, die_with_parent: bool) -> int:
    """Start ``kafka.Kafka`` on the node's ``server.properties``; its output goes to ``log``."""
    jvm = _jvm(_java(), ensure_jars(), node_dir / "log4j2.yaml", heap)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [*jvm, "kafka.Kafka", str(node_dir / "server.properties")],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if die_with_parent else None,
        )
    return proc.pid


def start_cluster(
    nodes: int = 3,
    data_dir: str | Path | None = None,
    overrides: Mapping[str, str] | None = None,
    timeout_s: float = START_TIMEOUT_S,
    die_with_parent: bool = False,
) -> Cluster:
    """Start ``nodes`` combined KRaft nodes on 127.0.0.1; return once each serves and the
    cluster lists them all.

    Each node has its own client and controller port and its own folder ``node-<id>`` under
    ``data_dir`` (a temporary folder if not given, removed by ``Cluster.stop``). A kept
    ``data_dir`` keeps the cluster id and the ports, so starting it again brings the same cluster
    back. With three nodes or more, topics get replication 3 and ``min.insync.replicas=2`` by
    default (below three, 1 and 1).
    """
    if nodes < 1:
        raise LauncherError(f"--nodes must be at least 1, got {nodes}")
    java = _java()
    temporary = data_dir is None
    root = Path(tempfile.mkdtemp(prefix="timesync-kafka-")) if data_dir is None else Path(data_dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    cluster: Cluster | None = None
    try:
        layout_file = root / CLUSTER_FILE_NAME
        if layout_file.exists():
            layout = json.loads(layout_file.read_text())
            if len(layout["nodes"]) != nodes:
                raise LauncherError(
                    f"data dir {root} holds a cluster of {len(layout['nodes'])} nodes, not {nodes}"
                )
        else:
            ports = _assign_ports(
                {f"{kind}{i}": None for i in range(1, nodes + 1) for kind in ("c", "p")}, {}
            )
            layout = {
                "cluster_id": _cluster_id(),
                "nodes": [
                    {"node_id": i, "port": ports[f"p{i}"], "controller_port": ports[f"c{i}"]}
                    for i in range(1, nodes + 1)
                ],
            }
        voters = ",".join(f"{n['node_id']}@127.0.0.1:{n['controller_port']}" for n in layout["nodes"])
        jars = ensure_jars()
        members = []
        formats = []
        for spec in layout["nodes"]:
            node_dir = root / f"node-{spec['node_id']}"
            node_dir.mkdir(exist_ok=True)
            log = node_dir / "server.log"
            (node_dir / "server.properties").write_text(
                _server_properties(
                    spec["port"],
                    spec["controller_port"],
                    node_dir,
                    overrides or {},
                    node_id=spec["node_id"],
                    voters=voters,
                    replicated=nodes >= CLUSTER_REPLICATION,
                )
            )
            (node_dir / "log4j2.yaml").write_text(LOG4J2.format(log=str(log).replace("\\", "/")))
            members.append(
                Node(spec["node_id"], spec["port"], spec["controller_port"], str(node_dir), str(log))
            )
            if not (node_dir / "log" / "meta.properties").exists():
                cmd = [
                    *_jvm(java, jars, node_dir / "log4j2.yaml", CLUSTER_HEAP),
                    "kafka.tools.StorageTool",
                    "format",
                    "-t",
                    layout["cluster_id"],
                    "-c",
                    str(node_dir / "server.properties"),
                    "-g",
                ]
                formats.append(
                    subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                )
        for fmt in formats:  # formatted side by side: each is a JVM start
            output, _ = fmt.communicate()
            if fmt.returncode != 0:
                raise LauncherError(
                    f"formatting KRaft storage failed (exit {fmt.returncode}): {output[-2000:]}"
                )
        layout_file.write_text(json.dumps(layout))
        cluster = Cluster(members, str(root), temporary, die_with_parent)
        cluster.start_nodes([n.node_id for n in members], timeout_s)
        return cluster
    except BaseException:
        if cluster is not None:
            cluster.stop_nodes([n.node_id for n in cluster.nodes], 5.0)
        if temporary:
            shutil.rmtree(root, ignore_errors=True)
        raise


def _load_state(state_file: Path) -> Broker | None:
    try:
        return Broker(**json.loads(state_file.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _load_cluster(state_file: Path) -> Cluster | None:
    """The cluster ``start --nodes N`` recorded (``None`` if the state is a single broker's)."""
    try:
        recorded = json.loads(state_file.read_text())["cluster"]
        nodes = [Node(**node) for node in recorded.pop("nodes")]
        return Cluster(nodes, **recorded)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _save_cluster(state_file: Path, cluster: Cluster) -> None:
    state_file.parent.mkdir(parents=True, exist_ok=True)
    state_file.write_text(json.dumps({"cluster": dataclasses.asdict(cluster)}))


def _print_cluster(cluster: Cluster) -> None:
    """The bootstrap (every node) alone on the first line, then ``node ID ADDRESS up|down``."""
    print(cluster.bootstrap)
    for node in cluster.nodes:
        print(f"node {node.node_id} {node.bootstrap} {'up' if node.alive() else 'down'}")


def _cluster_command(args: argparse.Namespace) -> int:
    """``stop``/``start``/``kill --node ID`` on the recorded cluster; ``stop`` without a node."""
    cluster = _load_cluster(args.state)
    if cluster is None:
        if args.command == "stop" and args.node is None:
            return -1  # not a cluster: the single broker's stop
        raise LauncherError(f"no cluster recorded in {args.state}: run 'kafka.py start --nodes 3' first")
    if args.node is None:  # stop the whole cluster
        cluster.stop()
        args.state.unlink(missing_ok=True)
        print(f"kafka: stopped the cluster ({len(cluster.nodes)} nodes)", file=sys.stderr)
        return 0
    node = cluster.node(args.node)
    if args.command == "start":
        cluster.start_node(args.node, args.timeout)
        print(f"kafka: node {args.node} up on {node.bootstrap} (pid {node.pid})", file=sys.stderr)
    elif args.command == "stop":
        cluster.stop_node(args.node)
        print(f"kafka: node {args.node} stopped", file=sys.stderr)
    else:
        cluster.kill_node(args.node)
        print(f"kafka: node {args.node} killed (SIGKILL)", file=sys.stderr)
    _save_cluster(args.state, cluster)
    return 0


def _scram_users_arg(items: Sequence[str]) -> dict[str, str]:
    users = {}
    for item in items:
        name, sep, password = item.partition("=")
        if not sep or not name:
            raise LauncherError("--scram-user expects NAME=PASSWORD, got an item without '=' or name")
        users[name] = password
    return users


def _ssl_arg(args: argparse.Namespace) -> SslFiles | None:
    files = {"cafile": args.ssl_cafile, "certfile": args.ssl_certfile, "keyfile": args.ssl_keyfile}
    given = [k for k, v in files.items() if v]
    if not given and args.ssl_key_password is None:
        return None
    if len(given) < len(files):
        missing = ", ".join(f"--ssl-{k}" for k in files if k not in given)
        raise LauncherError(
            f"SSL listeners need --ssl-cafile, --ssl-certfile and --ssl-keyfile; missing {missing}"
        )
    return SslFiles(args.ssl_cafile, args.ssl_certfile, args.ssl_keyfile, args.ssl_key_password)


def _overrides_arg(items: Sequence[str]) -> dict[str, str]:
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise LauncherError(f"--override expects KEY=VALUE, got {item!r}")
        overrides[key.strip()] = value.strip()
    return overrides


def _print_listeners(broker: Broker) -> None:
    """The bootstrap alone on the first line (scripts read it), then ``NAME ADDRESS`` per extra listener."""
    print(broker.bootstrap)
    for name, address in broker.listeners().items():
        if name != "PLAINTEXT":
            print(f"{name} {address}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafka.py", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--state",
        type=Path,
        default=STATE_FILE,
        help=f"where start records the broker for stop/status (default {STATE_FILE})",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser(
        "start", help="start the broker; print its bootstrap address, then NAME ADDRESS per secure listener"
    )
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
    start.add_argument(
        "--scram-user",
        action="append",
        default=[],
        metavar="NAME=PASSWORD",
        help="add a SASL_PLAINTEXT listener (SCRAM-SHA-512/256) with this user; repeatable",
    )
    start.add_argument("--ssl-cafile", help="PEM CA certificate(s) trusted for client certificates")
    start.add_argument("--ssl-certfile", help="PEM certificate chain of the broker, leaf first")
    start.add_argument("--ssl-keyfile", help="PEM PKCS#8 private key of the broker")
    start.add_argument("--ssl-key-password", help="password of --ssl-keyfile, if it is encrypted")
    start.add_argument(
        "--nodes",
        type=int,
        help="start a cluster of this many combined KRaft nodes (3: replication 3, "
        "min.insync.replicas=2); prints every node's address, then one line per node",
    )
    start.add_argument(
        "--node", type=int, metavar="ID", help="start this stopped node of the recorded cluster"
    )
    stop = sub.add_parser(
        "stop", help="stop the broker (or cluster) started by 'start' and wait for it to exit"
    )
    stop.add_argument("--node", type=int, metavar="ID", help="stop only this node of the cluster (cleanly)")
    kill = sub.add_parser("kill", help="kill -9 one node of the cluster (a crash; its data stays)")
    kill.add_argument("--node", type=int, metavar="ID", required=True)
    sub.add_parser("status", help="print the addresses as start does if the broker is up (exit 1 if not)")
    args = parser.parse_args(argv)

    try:
        if args.command in {"stop", "kill"} or (args.command == "start" and args.node is not None):
            done = _cluster_command(args)
            if done >= 0:
                return done
        if args.command == "start" and args.nodes is not None:
            running_cluster = _load_cluster(args.state)
            if _load_state(args.state) or (running_cluster and running_cluster.alive()):
                raise LauncherError(
                    "a broker or cluster started from here is running; run 'kafka.py stop' first"
                )
            if args.port or args.scram_user or _ssl_arg(args):
                raise LauncherError(
                    "--nodes takes no --port, --scram-user or --ssl-* (the cluster is PLAINTEXT)"
                )
            t0 = time.monotonic()
            cluster = start_cluster(args.nodes, args.data_dir, _overrides_arg(args.override), args.timeout)
            _save_cluster(args.state, cluster)
            _print_cluster(cluster)
            print(f"kafka: {args.nodes} nodes up in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        elif args.command == "start":
            if (recorded := _load_cluster(args.state)) and recorded.alive():
                raise LauncherError("a cluster started from here is running; run 'kafka.py stop' first")
            running = _load_state(args.state)
            if running and running.alive():
                raise LauncherError(
                    f"a broker started from here is already running on {running.bootstrap} "
                    f"(pid {running.pid}); run 'kafka.py stop' first"
                )
            overrides = _overrides_arg(args.override)
            t0 = time.monotonic()
            log_file = args.log_file or RUN_DIR / "broker.log"
            broker = start_broker(
                args.port,
                args.data_dir,
                log_file,
                overrides,
                args.timeout,
                scram_users=_scram_users_arg(args.scram_user),
                ssl=_ssl_arg(args),
            )
            args.state.parent.mkdir(parents=True, exist_ok=True)
            args.state.write_text(json.dumps(dataclasses.asdict(broker)))
            _print_listeners(broker)
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
            cluster = _load_cluster(args.state)
            if cluster is not None:
                _print_cluster(cluster)
                return 0 if any(broker_answers(n.port) for n in cluster.nodes if n.alive()) else 1
            broker = _load_state(args.state)
            if broker is None or not broker.alive() or not broker_answers(broker.port):
                print("kafka: not running", file=sys.stderr)
                return 1
            _print_listeners(broker)
    except LauncherError as e:
        print(f"kafka: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
