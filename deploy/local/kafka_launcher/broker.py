"""One local broker: a combined (broker + controller) KRaft node on 127.0.0.1.

:func:`start_broker` formats storage if needed, starts the JVM and returns once the broker answers
a metadata request (and each secure listener accepts connections). Without a data dir the data
lives in a temporary folder that :meth:`Broker.stop` removes; with one, the data and the ports
(recorded beside it, ``PORT_FILE_NAME``) survive a stop, so a restart brings back the same broker.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from .configuration import HEAP, cluster_id, format_command, log4j2, server_properties
from .install import START_TIMEOUT_S, STOP_TIMEOUT_S, LauncherError, ensure_jars, java
from .network import assign_ports, broker_answers, check_port_free, port_accepts
from .processes import jvm, launch, log_tail, pid_alive, terminate
from .security import (
    SslFiles,
    check_scram_users_formatted,
    record_scram_users,
    sasl_properties,
    scram_format_args,
    ssl_properties,
)

PORT_FILE_NAME = "timesync-ports.json"  # inside a kept data dir: a restart reuses the ports


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
        return pid_alive(self.pid)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Send SIGTERM, wait for the process to exit (SIGKILL after ``timeout_s``), clean up."""
        terminate(self.pid, timeout_s)
        if self.temporary:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def kill(self) -> None:
        """End the broker abruptly (SIGKILL), keeping its data: a crash, for fault tests."""
        terminate(self.pid, 0.0)


@dataclasses.dataclass(frozen=True)
class BrokerSettings:
    """What broker to start (every field optional).

    ``port`` and ``controller_port``: default the ones a kept ``data_dir`` recorded, else free
    ones. ``data_dir``: keep the data there across stop and start (default: a temporary folder
    removed on stop). ``log_file``: default ``server.log`` in the data dir. ``overrides``:
    ``server.properties`` settings that win over the launcher's.

    ``scram_users`` (name → password) adds a SASL_PLAINTEXT listener with SCRAM-SHA-512 and
    SCRAM-SHA-256 (``Broker.sasl_bootstrap``). The users are written when storage is formatted,
    so a kept ``data_dir`` keeps the users (and passwords) of its first start; asking it for a
    user it was not formatted with is an error. ``ssl`` adds the SSL listener
    (``Broker.ssl_bootstrap``) and the MTLS listener that requires a client certificate
    (``Broker.mtls_bootstrap``).
    """

    port: int | None = None
    controller_port: int | None = None
    data_dir: str | Path | None = None
    log_file: str | Path | None = None
    overrides: Mapping[str, str] = dataclasses.field(default_factory=dict)
    scram_users: Mapping[str, str] = dataclasses.field(default_factory=dict)
    ssl: SslFiles | None = None


def start_broker(
    settings: BrokerSettings | None = None,
    *,
    timeout_s: float = START_TIMEOUT_S,
    die_with_parent: bool = False,
) -> Broker:
    """Format storage if needed, start the broker, return once it answers a metadata request.

    ``die_with_parent`` ties the broker's life to the calling process (tests use it so that an
    interrupted test run leaves no JVM behind). A start that fails removes a temporary data dir.
    """
    s = settings or BrokerSettings()
    java_bin = java()
    temporary = s.data_dir is None
    data = (
        Path(tempfile.mkdtemp(prefix="timesync-kafka-")) if s.data_dir is None else Path(s.data_dir).resolve()
    )
    data.mkdir(parents=True, exist_ok=True)
    try:
        return _start(s, java_bin, data, temporary, timeout_s, die_with_parent)
    except BaseException:
        if temporary:
            shutil.rmtree(data, ignore_errors=True)
        raise


def _start(
    s: BrokerSettings, java_bin: str, data: Path, temporary: bool, timeout_s: float, tie: bool
) -> Broker:
    scram_args = scram_format_args(s.scram_users)  # checks the users before anything runs
    ports, recorded = _ports(s, data, temporary)
    jars = ensure_jars()
    (data / PORT_FILE_NAME).write_text(json.dumps(recorded))
    formatted = (data / "log" / "meta.properties").exists()
    if s.scram_users and formatted:
        check_scram_users_formatted(data, s.scram_users)
    config, log, log4j = _write_config(s, data, ports)
    command = jvm(java_bin, jars, log4j, HEAP)
    if not formatted:
        _format(command, config, scram_args, s.scram_users)
        record_scram_users(data, s.scram_users)
    proc = launch(command, config, log, tie)
    broker = Broker(
        proc.pid,
        ports["port"],
        ports["controller_port"],
        str(data),
        temporary,
        str(log),
        sasl_port=ports.get("sasl_port"),
        ssl_port=ports.get("ssl_port"),
        mtls_port=ports.get("mtls_port"),
    )
    _wait_serving(broker, proc, ports, timeout_s)
    return broker


def _ports(s: BrokerSettings, data: Path, temporary: bool) -> tuple[dict[str, int], dict[str, int]]:
    """Every listener's port, checked free; and what to record beside a kept data dir (these, and
    the ports of listeners this start does not open, for a later start that does)."""
    port_file = data / PORT_FILE_NAME
    kept: dict[str, int] = {}
    if not temporary and port_file.exists():
        kept = json.loads(port_file.read_text())
    wanted: dict[str, int | None] = {"port": s.port, "controller_port": s.controller_port}
    if s.scram_users:
        wanted["sasl_port"] = None
    if s.ssl is not None:
        wanted |= {"ssl_port": None, "mtls_port": None}
    ports = assign_ports(wanted, kept)
    for p in ports.values():
        check_port_free(p)
    return ports, kept | ports


def _write_config(s: BrokerSettings, data: Path, ports: Mapping[str, int]) -> tuple[Path, Path, Path]:
    """``server.properties`` (with the secure listeners asked for) and the log configuration;
    their paths and the log's."""
    listeners: list[tuple[str, str, int]] = []
    security: dict[str, str] = {}
    if s.scram_users:
        listeners.append(("SASL_PLAINTEXT", "SASL_PLAINTEXT", ports["sasl_port"]))
        security |= sasl_properties()
    if s.ssl is not None:
        listeners += [("SSL", "SSL", ports["ssl_port"]), ("MTLS", "SSL", ports["mtls_port"])]
        security |= ssl_properties(s.ssl, data)
    log = Path(s.log_file) if s.log_file else data / "server.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    config = data / "server.properties"
    config.touch(mode=0o600)  # may hold ssl.key.password
    config.write_text(
        server_properties(ports["port"], ports["controller_port"], data, s.overrides, listeners, security)
    )
    log4j = data / "log4j2.yaml"
    log4j.write_text(log4j2(log))
    return config, log, log4j


def _format(command: list[str], config: Path, scram_args: list[str], users: Mapping[str, str]) -> None:
    """Format the KRaft storage of a new data dir, with its SCRAM users."""
    done = subprocess.run(
        format_command(command, cluster_id(), config, scram_args), capture_output=True, text=True
    )
    if done.returncode != 0:
        # The tool echoes no passwords, but keep them out of the message regardless.
        output = (done.stdout + done.stderr).strip()[-2000:]
        for password in users.values():
            if password:
                output = output.replace(password, "***")
        raise LauncherError(f"formatting KRaft storage failed (exit {done.returncode}): {output}")


def _wait_serving(
    broker: Broker, proc: subprocess.Popen[bytes], ports: Mapping[str, int], timeout_s: float
) -> None:
    """Until the broker serves: fail with its log if it exits, or stop it after ``timeout_s``."""
    log = broker.log_file
    deadline = time.monotonic() + timeout_s
    # The PLAINTEXT listener answering means the broker has registered and serves; the other
    # listeners open with it, but wait until each accepts a connection before saying so.
    extra_ports = [p for name, p in ports.items() if name not in {"port", "controller_port"}]
    while not (broker_answers(broker.port) and all(port_accepts(p) for p in extra_ports)):
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
