"""``timesync-sidecar offsets reset --config FILE (--to-earliest | --to-latest | --to-datetime T |
--by-duration D | --to-offset N) [--partition TOPIC:N ...] [--dry-run]``.

Moves the sidecar's consumer group (``group.id``, or ``timesync-<output.topic>``) on every
partition of ``input.topics`` — or only on the ones named with ``--partition`` (past a record
that stops every start, say) — as Kafka's ``kafka-consumer-groups --reset-offsets`` would, and
prints the plan as a table (a rich table on a terminal; aligned plain lines when the output is a
pipe or ``CI=true``). Refused with one line and exit 1 while a sidecar runs on the group (Kafka
Connect's KIP-875 rule: offsets change only while no worker runs), exit 2 on a usage or config
error. ``--dry-run`` reads and prints, and writes nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import warnings
from typing import Any, NoReturn

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from sidecar.config import ConfigError, SidecarConfig, load_config, without_values
from sidecar.kafka.admin import AdminError
from sidecar.offsets.kafka import GroupOffsets, Refused
from sidecar.offsets.plan import HEADER, Mode, Move, PlanError, Target, plain, plan, table, target
from sidecar.service import claim
from sidecar.service.grouping import grouping_of

EXIT_OK, EXIT_FATAL, EXIT_CONFIG = 0, 1, 2

_MODES: dict[str, Mode] = {
    "to_earliest": "earliest",
    "to_latest": "latest",
    "to_datetime": "datetime",
    "by_duration": "duration",
    "to_offset": "offset",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_CONFIG, f"timesync-sidecar offsets: {without_values(message)} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="timesync-sidecar offsets", description=__doc__.split("\n\n")[1])
    verbs = parser.add_subparsers(dest="verb", required=True, parser_class=_Parser)
    reset = verbs.add_parser("reset", help="move the group's committed offsets (no sidecar may run)")
    reset.add_argument("--config", "-c", metavar="FILE", help="the sidecar's config file")
    reset.add_argument("--set", "-s", action="append", default=[], metavar="KEY=VALUE", help="a config key")
    where = reset.add_mutually_exclusive_group(required=True)
    where.add_argument("--to-earliest", action="store_true", help="the log start of every partition")
    where.add_argument(
        "--to-latest", action="store_true", help="the end of every partition (skip the backlog)"
    )
    where.add_argument(
        "--to-datetime", metavar="ISO-8601", help="the first record at or after this time (with a zone: ...Z)"
    )
    where.add_argument(
        "--by-duration", metavar="PnDTnHnMnS", help="the first record at or after now minus this"
    )
    where.add_argument("--to-offset", metavar="N", help="offset N on every partition (clamped into the log)")
    reset.add_argument(
        "--partition",
        action="append",
        default=[],
        metavar="TOPIC:N",
        type=_partition,
        help="only this input partition (repeat for more; default: every one)",
    )
    reset.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    return parser


def _partition(text: str) -> TopicPartition:
    topic, _, number = text.rpartition(":")
    if not topic or not number.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not TOPIC:N (an input topic and a partition number)")
    return TopicPartition(topic, int(number))


def _goal(args: argparse.Namespace) -> Target:
    for attr, mode in _MODES.items():
        value = getattr(args, attr)
        if value:
            return target(mode, None if value is True else str(value), int(time.time() * 1000))
    raise PlanError("choose where to reset to")  # argparse requires one; kept for mypy's sake


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    warnings.simplefilter("ignore")
    try:
        config = load_config(args.config, args.set)
        goal = _goal(args)
    except (ConfigError, PlanError) as e:
        print(f"timesync-sidecar offsets: {e}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        moves = asyncio.run(reset(config, goal, dry_run=args.dry_run, only=args.partition))
    except PlanError as e:
        print(f"timesync-sidecar offsets: {e}", file=sys.stderr)
        return EXIT_CONFIG
    except Refused as e:
        print(f"timesync-sidecar offsets: refused: {e}", file=sys.stderr)
        return EXIT_FATAL
    except (AdminError, KafkaError) as e:
        print(f"timesync-sidecar offsets: {e}", file=sys.stderr)
        return EXIT_FATAL
    show(moves)
    group = config.effective_group_id
    if args.dry_run:
        print(f"dry run: group {group} unchanged")
    else:
        print(f"group {group}: {len(moves)} partition(s) reset")
    return EXIT_OK


#: How long a reset waits after its commit before checking that nobody wrote over it: a
#: single-task sidecar renews its claim (and so re-commits what it read at start) within
#: ``claim.REFRESH_S`` of starting.
SETTLE_S = claim.REFRESH_S + 1.0


def fence_owner() -> str:
    """The owner of the reset's own claim (no sidecar's host name has a space)."""
    return f"offsets reset on {claim.owner()}"


async def reset(
    config: SidecarConfig,
    goal: Target,
    dry_run: bool,
    settle_s: float = SETTLE_S,
    only: list[TopicPartition] | None = None,
) -> list[Move]:
    """Read, plan and (unless ``dry_run``) commit, refusing while a sidecar runs; ``only``: just
    these input partitions (one not among them is a :class:`PlanError`).

    The race with a single-task sidecar that starts meanwhile is closed in three steps:

    1. **Fence.** The new offsets are committed first with the reset's own running claim, so a
       sidecar that starts from then on is refused (:mod:`sidecar.service.claim`).
    2. **Check again,** ignoring the fence: a sidecar that started before it and has committed
       since is seen, and the reset is refused.
    3. **Commit, then verify.** The offsets are committed again without a claim (any sidecar may
       start now, from them), and after ``settle_s`` — longer than a sidecar takes to renew its
       claim — read back: if a sidecar that started before the fence wrote over them, the reset
       fails with exit 1 naming it, instead of being lost in silence.
    """
    async with GroupOffsets(config) as group:
        tps = _chosen(await group.partitions(), only or [])
        committed = await group.committed()
        await group.check_idle(committed)
        moves = plan(await group.facts(tps, committed, goal), goal)
        if dry_run:
            return moves
        new = {TopicPartition(m.topic, m.partition): m.new for m in moves}
        me = fence_owner()
        fence = claim.encode(claim.Claim(me, int(time.time() * 1000), "running"))
        await group.commit(new, fence)
        await group.check_idle(await group.committed(), me=me)
        await group.commit(new)
        if grouping_of(config).claims and settle_s > 0:
            await asyncio.sleep(settle_s)
            await verify(group, new)
        return moves


def _chosen(tps: list[TopicPartition], only: list[TopicPartition]) -> list[TopicPartition]:
    if not only:
        return tps
    unknown = [f"{tp.topic}:{tp.partition}" for tp in only if tp not in tps]
    if unknown:
        raise PlanError(
            f"--partition {', '.join(unknown)}: not a partition of input.topics "
            f"({', '.join(sorted({tp.topic for tp in tps}))})"
        )
    return [tp for tp in tps if tp in only]


async def verify(group: GroupOffsets, new: dict[TopicPartition, int]) -> None:
    """Raise :class:`Refused` if the group's committed offsets are no longer ``new``."""
    now = await group.committed()
    moved = sorted(
        f"{tp.topic}-{tp.partition}" for tp, offset in new.items() if _offset(now.get(tp)) != offset
    )
    if not moved:
        return
    owners = sorted(
        {c.owner for c in (claim.decode(getattr(o, "metadata", None)) for o in now.values()) if c}
    )
    who = f" (host {', '.join(owners)})" if owners else ""
    raise Refused(
        f"a sidecar{who} started during the reset and committed over it on {', '.join(moved)}: "
        "stop every sidecar of the group, then reset again"
    )


def _offset(committed: Any) -> int | None:
    return None if committed is None else int(committed.offset)


def show(moves: list[Move]) -> None:
    """The plan: a rich table on a terminal, aligned plain lines otherwise (pipes, logs, CI)."""
    rows = table(moves)
    if sys.stdout.isatty() and os.environ.get("CI", "").lower() != "true":
        try:
            from rich.console import Console
            from rich.table import Table
        except ImportError:  # rich comes with the bench extra; plain lines say the same
            pass
        else:
            grid = Table(*HEADER)
            for row in rows:
                grid.add_row(*row)
            Console().print(grid)
            return
    print("\n".join(plain(rows)))
