"""``timesync-sidecar --config FILE [--set key=value ...]`` (also ``python -m sidecar``).

``timesync-sidecar config`` lists the config keys (:mod:`sidecar.config.listing`) and
``timesync-sidecar offsets reset ...`` is the offsets command (:mod:`sidecar.offsets.cli`); any
other invocation runs the sidecar, as it always has.

Runs until SIGTERM or SIGINT, then drains what is safe, commits and exits 0. Exit 2 on a config
error and 1 on a fatal runtime error, each with one clear line on stderr and no traceback.
``--help`` is written for the command line (:data:`DESCRIPTION`, :data:`COMMANDS`), not taken
from this docstring: it names no key, and points to ``timesync-sidecar config`` for them.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
import warnings
from typing import NoReturn

from sidecar import __version__
from sidecar.config import ConfigError, SidecarConfig, load_config, without_values
from sidecar.core import IDLE_AUTO

EXIT_OK, EXIT_FATAL, EXIT_CONFIG = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_CONFIG, f"timesync-sidecar: {without_values(message)} (see --help)\n")


DESCRIPTION = """\
Merge Kafka input partitions into one topic in event-time order.

Runs until SIGTERM or SIGINT, then writes what may go out, commits and exits 0.
Exit 2 on a config error, 1 on a fatal runtime error, each with one line on stderr.

Config keys come from the --config file, then TIMESYNC_<KEY> environment variables,
then --set, later wins. `timesync-sidecar config` lists every key: its default,
what it accepts and what it means."""

COMMANDS = """\
commands:
  timesync-sidecar config [KEY ...]    the config keys (--format table|markdown|json)
  timesync-sidecar offsets reset ...   move the group's committed offsets (replay)"""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="timesync-sidecar",
        description=DESCRIPTION,
        epilog=COMMANDS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", "-c", metavar="FILE", help="a .properties or YAML file of config keys")
    parser.add_argument(
        "--set",
        "-s",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config key (repeatable; wins over the file and the environment)",
    )
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument("--version", action="version", version=f"timesync {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["offsets"]:
        from sidecar.offsets.cli import main as offsets_main

        return offsets_main(argv[1:])
    if argv[:1] == ["config"]:
        from sidecar.config.listing import main as config_main

        return config_main(argv[1:])
    args = build_parser().parse_args(argv)
    warnings.simplefilter("ignore")  # a user sees our one-line errors, never a library's warnings
    try:
        config = load_config(args.config, args.set)
    except ConfigError as e:
        print(f"timesync-sidecar: {e}", file=sys.stderr)
        return EXIT_CONFIG
    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, logging.getLogger().level))
    import uvloop

    from sidecar.service.run_state import FatalError

    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(serve(config))
    except FatalError as e:
        print(f"timesync-sidecar: {e}", file=sys.stderr)
        return EXIT_FATAL
    except KeyboardInterrupt:
        return EXIT_OK
    return EXIT_OK


def tune_gc() -> None:
    """Fewer cyclic-GC passes: the data path allocates millions of short-lived, acyclic objects
    (records, header tuples) that reference counting frees; with CPython's default threshold
    (700) the collector runs every few hundred records and costs more than the merge. Objects
    made at start are frozen out of every future scan."""
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)


async def serve(config: SidecarConfig) -> None:
    """The pipeline and its HTTP server, stopped by SIGTERM/SIGINT."""
    from sidecar.service.http import start_http
    from sidecar.service.run_state import FatalError
    from sidecar.service.supervisor import Supervisor

    sidecar = Supervisor(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, sidecar.request_stop)
    http = None
    if config.http_port:
        try:
            http = await start_http(sidecar, config.http_host, config.http_port)
        except OSError as e:
            # asyncio words strerror as "error while attempting to bind on address (...): ..."
            reason = os.strerror(e.errno) if e.errno else e.strerror
            raise FatalError(
                f"cannot serve HTTP on {config.http_host}:{config.http_port}: {reason}"
            ) from None
    log = logging.getLogger("timesync")
    log.info(
        "merging %s into %s (task.grouping=%s, max.task.idle.ms=%s, %s)%s",
        config.input_topics,
        config.output_topic,
        config.task_grouping,
        {2**63 - 1: "max", IDLE_AUTO: "auto"}.get(config.max_task_idle_ms, config.max_task_idle_ms),
        config.processing_guarantee,
        f", HTTP on {config.http_host}:{config.http_port}" if http else "",
    )
    tune_gc()
    try:
        await sidecar.run()
    finally:
        if http is not None:
            await http.cleanup()
    log.info("stopped cleanly")
