"""The launcher's command line: its parser, and its options turned into the launcher's values.

``kafka.py`` runs the commands; this module only reads them (one-line errors, as
:class:`~.install.LauncherError`, for a value the parser cannot check).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from .install import RUN_DIR, START_TIMEOUT_S, STATE_FILE, LauncherError
from .security import SslFiles


def build_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafka.py", description=description)
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
    _start_arguments(start)
    stop = sub.add_parser(
        "stop", help="stop the broker (or cluster) started by 'start' and wait for it to exit"
    )
    stop.add_argument("--node", type=int, metavar="ID", help="stop only this node of the cluster (cleanly)")
    kill = sub.add_parser("kill", help="kill -9 one node of the cluster (a crash; its data stays)")
    kill.add_argument("--node", type=int, metavar="ID", required=True)
    sub.add_parser("status", help="print the addresses as start does if the broker is up (exit 1 if not)")
    return parser


def _start_arguments(start: argparse.ArgumentParser) -> None:
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


def scram_users_arg(items: Sequence[str]) -> dict[str, str]:
    users = {}
    for item in items:
        name, sep, password = item.partition("=")
        if not sep or not name:
            raise LauncherError("--scram-user expects NAME=PASSWORD, got an item without '=' or name")
        users[name] = password
    return users


def ssl_arg(args: argparse.Namespace) -> SslFiles | None:
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


def overrides_arg(items: Sequence[str]) -> dict[str, str]:
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise LauncherError(f"--override expects KEY=VALUE, got {item!r}")
        overrides[key.strip()] = value.strip()
    return overrides
