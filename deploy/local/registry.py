#!/usr/bin/env python3
"""Run a real Schema Registry (Apicurio Registry, in memory) on this machine, without Docker.

The ``avro:`` and ``protobuf:`` timestamp extractors read schemas from a registry through
Confluent's API; the tests and the demo need one that behaves like production. Apicurio Registry
serves Confluent's API under ``/apis/ccompat/v7`` and is published on Maven Central, so it runs
from the same cache as the broker's jars: ``mvn dependency:copy`` puts its ``tar.gz`` (~158 MB,
fetched once) in ``.cache/registry``, which this launcher unpacks and starts.

Standard library only, so it runs before any virtualenv exists.

    python deploy/local/registry.py start [--port N] [--timeout S]
    python deploy/local/registry.py status
    python deploy/local/registry.py stop
    python deploy/local/registry.py fetch

``start`` prints the Confluent-compatible URL (``http://127.0.0.1:PORT/apis/ccompat/v7``) once
``GET /subjects`` answers there. Storage is in memory: a stop forgets every schema.

It needs Java 21 or newer (the broker and Spark keep the default Java 17). The JVM is, in this
order: ``TIMESYNC_REGISTRY_JAVA`` (a ``java`` binary or a JDK folder), ``JAVA_HOME`` if it is
21+, the newest JDK 21+ under ``/usr/lib/jvm``, ``java`` on the PATH if it is 21+.

Importable: ``start_registry(...)`` returns a :class:`Registry` whose ``stop()`` ends it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VERSION = "3.3.3"
ARTIFACT = f"io.apicurio:apicurio-registry-app:{VERSION}:tar.gz:all"
CACHE = REPO / ".cache" / "registry"
ARCHIVE = CACHE / f"apicurio-registry-app-{VERSION}-all.tar.gz"
APP_DIR = CACHE / f"apicurio-registry-{VERSION}"
STATE_FILE = CACHE / "registry.json"
CCOMPAT = "/apis/ccompat/v7"
MIN_JAVA = 21
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0
HEAP = os.environ.get("TIMESYNC_REGISTRY_HEAP_OPTS", "-Xms64m -Xmx384m")


class LauncherError(RuntimeError):
    """A problem the user can fix; the CLI prints it as one line and exits 1."""


@dataclasses.dataclass
class Registry:
    """A running local registry. ``stop()`` ends it (its in-memory schemas go with it)."""

    pid: int
    port: int
    log_file: str

    @property
    def url(self) -> str:
        """The Confluent-compatible base URL, as clients take it for ``schema.registry.url``."""
        return f"http://127.0.0.1:{self.port}{CCOMPAT}"

    def alive(self) -> bool:
        return _pid_alive(self.pid)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM, wait for the exit (SIGKILL after ``timeout_s``)."""
        _terminate(self.pid, timeout_s)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(ChildProcessError):  # a zombie child of ours: reap it
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return True


def _terminate(pid: int, timeout_s: float) -> None:
    if not _pid_alive(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
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


def ensure_app(quiet: bool = True) -> Path:
    """Fetch (once, with Maven) and unpack the registry; return the folder of ``quarkus-run.jar``."""
    if (APP_DIR / "quarkus-run.jar").is_file():
        return APP_DIR
    if not ARCHIVE.is_file():
        mvn = shutil.which("mvn")
        if mvn is None:
            raise LauncherError(
                "mvn not found on PATH: install Apache Maven (the registry comes from Maven Central)"
            )
        CACHE.mkdir(parents=True, exist_ok=True)
        cmd = [mvn, "-B", "dependency:copy", f"-Dartifact={ARTIFACT}", f"-DoutputDirectory={CACHE}"]
        if quiet:
            cmd.insert(1, "-q")
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=CACHE)
        if proc.returncode != 0 or not ARCHIVE.is_file():
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise LauncherError(f"mvn could not fetch {ARTIFACT} (exit {proc.returncode}):\n{tail}")
    # Unpack beside, then rename: an interrupted unpack never passes for a complete one.
    partial = APP_DIR.with_name(APP_DIR.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    with tarfile.open(ARCHIVE) as archive:
        archive.extractall(partial, filter="data")
    if not (partial / "quarkus-run.jar").is_file():
        raise LauncherError(f"{ARCHIVE} holds no quarkus-run.jar; delete it to fetch it again")
    shutil.rmtree(APP_DIR, ignore_errors=True)
    partial.rename(APP_DIR)
    return APP_DIR


def _major(version: str) -> int | None:
    """The feature release of a Java version string: ``"25.0.3"`` → 25, ``"1.8.0_402"`` → 8."""
    m = re.match(r"(\d+)(?:\.(\d+))?", version)
    if m is None:
        return None
    first = int(m.group(1))
    return int(m.group(2) or 0) if first == 1 else first


def _release_major(jdk: Path) -> int | None:
    """The ``JAVA_VERSION`` of a JDK folder's ``release`` file."""
    try:
        text = (jdk / "release").read_text()
    except OSError:
        return None
    m = re.search(r'^JAVA_VERSION="([^"]+)"', text, re.MULTILINE)
    return _major(m.group(1)) if m else None


def _binary_major(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "([^"]+)"', out.stderr + out.stdout)
    return _major(m.group(1)) if m else None


def find_java(jvm_root: Path = Path("/usr/lib/jvm")) -> str:
    """A ``java`` of release 21 or newer (see the module docstring for the order)."""
    override = os.environ.get("TIMESYNC_REGISTRY_JAVA")
    if override:
        path = Path(override)
        java = path / "bin" / "java" if path.is_dir() else path
        if not java.is_file():
            raise LauncherError(
                f"TIMESYNC_REGISTRY_JAVA={override} is neither a java binary nor a JDK folder"
            )
        return str(java)
    home = os.environ.get("JAVA_HOME")
    if home and (_release_major(Path(home)) or 0) >= MIN_JAVA and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = []
    if jvm_root.is_dir():
        for jdk in jvm_root.iterdir():
            major = _release_major(jdk)
            if major is not None and major >= MIN_JAVA and (jdk / "bin" / "java").is_file():
                found.append((major, str(jdk / "bin" / "java")))
    if found:
        return max(found)[1]
    on_path = shutil.which("java")
    if on_path and (_binary_major(on_path) or 0) >= MIN_JAVA:
        return on_path
    raise LauncherError(
        f"no Java {MIN_JAVA}+ found (Apicurio Registry {VERSION} needs it; JAVA_HOME, {jvm_root} and "
        "the PATH hold older ones or none): install a JDK 21+ or set TIMESYNC_REGISTRY_JAVA"
    )


def registry_answers(url: str, timeout_s: float = 2.0) -> bool:
    """Whether the Confluent API at ``url`` lists its subjects."""
    try:
        with urllib.request.urlopen(f"{url}/subjects", timeout=timeout_s) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def log_tail(log_file: str | Path, lines: int = 25) -> str:
    try:
        text = Path(log_file).read_text(errors="replace")
    except OSError:
        return "(no registry log)"
    return "\n".join(text.splitlines()[-lines:])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux only: let the kernel end the registry if the process that started it dies."""
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def start_registry(
    port: int | None = None,
    log_file: str | Path | None = None,
    timeout_s: float = START_TIMEOUT_S,
    die_with_parent: bool = False,
) -> Registry:
    """Start the registry on 127.0.0.1 and return once its Confluent API answers.

    ``die_with_parent`` ties its life to the calling process (tests use it so that an interrupted
    run leaves no JVM behind).
    """
    java = find_java()
    app = ensure_app()
    port = port or free_port()
    log = Path(log_file) if log_file else CACHE / f"registry-{port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = os.environ | {
        "QUARKUS_HTTP_HOST": "127.0.0.1",
        "QUARKUS_HTTP_PORT": str(port),
        # Quarkus's management interface (health, metrics) binds *:9000 by default: a second
        # registry on the machine failed to start ("Address already in use"), and it listened
        # on every interface. Loopback, on a port of its own.
        "QUARKUS_MANAGEMENT_HOST": "127.0.0.1",
        "QUARKUS_MANAGEMENT_PORT": str(free_port()),
        "QUARKUS_HTTP_ACCESS_LOG_ENABLED": "false",
        "QUARKUS_LOG_CONSOLE_FORMAT": "%d{HH:mm:ss} %-5p [%c{2.}] %s%e%n",
    }
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [java, *HEAP.split(), "-jar", str(app / "quarkus-run.jar")],
            cwd=app,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if die_with_parent else None,
        )
    registry = Registry(proc.pid, port, str(log))
    deadline = time.monotonic() + timeout_s
    while not registry_answers(registry.url):
        if proc.poll() is not None:
            raise LauncherError(
                f"the registry exited with code {proc.returncode} while starting; log {log}:\n{log_tail(log)}"
            )
        if time.monotonic() > deadline:
            registry.stop(timeout_s=5)
            raise LauncherError(
                f"the registry did not answer on {registry.url} within {timeout_s:g} s; "
                f"log {log}:\n{log_tail(log)}"
            )
        time.sleep(0.25)
    return registry


def _load_state(state_file: Path) -> Registry | None:
    try:
        return Registry(**json.loads(state_file.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="registry.py", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--state",
        type=Path,
        default=STATE_FILE,
        help=f"where start records the registry for stop/status (default {STATE_FILE})",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start the registry; print its Confluent-compatible URL")
    start.add_argument("--port", type=int, help="HTTP port on 127.0.0.1 (default: a free one)")
    start.add_argument("--log-file", help=f"registry log (default: {CACHE}/registry-PORT.log)")
    start.add_argument("--timeout", type=float, default=START_TIMEOUT_S, help="seconds to wait for it")
    sub.add_parser("stop", help="stop the registry started by 'start' and wait for it to exit")
    sub.add_parser("status", help="print the URL if the registry is up (exit 1 if not)")
    sub.add_parser("fetch", help="fetch and unpack the registry into the cache, then exit")
    args = parser.parse_args(argv)

    try:
        if args.command == "fetch":
            print(ensure_app(quiet=False))
        elif args.command == "start":
            running = _load_state(args.state)
            if running and running.alive():
                raise LauncherError(
                    f"a registry started from here is already running on {running.url} "
                    f"(pid {running.pid}); run 'registry.py stop' first"
                )
            t0 = time.monotonic()
            registry = start_registry(args.port, args.log_file, args.timeout)
            args.state.parent.mkdir(parents=True, exist_ok=True)
            args.state.write_text(json.dumps(dataclasses.asdict(registry)))
            print(registry.url)
            print(
                f"registry: up in {time.monotonic() - t0:.1f} s "
                f"(pid {registry.pid}, log {registry.log_file})",
                file=sys.stderr,
            )
        elif args.command == "stop":
            registry = _load_state(args.state)
            if registry is None:
                print("registry: none recorded; nothing to stop", file=sys.stderr)
                return 0
            registry.stop()
            args.state.unlink(missing_ok=True)
            print(f"registry: stopped pid {registry.pid}", file=sys.stderr)
        else:
            registry = _load_state(args.state)
            if registry is None or not registry.alive() or not registry_answers(registry.url):
                print("registry: not running", file=sys.stderr)
                return 1
            print(registry.url)
    except LauncherError as e:
        print(f"registry: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
