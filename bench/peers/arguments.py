"""The command line every copying peer takes (``python -m bench.peers.passthrough`` and
``…rdkafka_copy``): the same four options, so that bench.systems starts either the same way."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence


def copy_arguments(prog: str, description: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """``--bootstrap-servers``, ``--input-topics`` (comma list), ``--output-topic`` and
    ``--group-id`` (default: ``<peer>-<unix time>``, a fresh group per start)."""
    parser = argparse.ArgumentParser(prog=f"python -m bench.peers.{prog}", description=description)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--input-topics", required=True, help="comma list")
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--group-id", default=f"{prog.replace('_', '-')}-{int(time.time())}")
    return parser.parse_args(argv)
