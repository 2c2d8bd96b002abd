"""Demo producer for ``deploy/compose.yaml``: a fast topic beside a slow, bursty one, forever.

Each round writes ``testkit.workloads.skewed`` live (paced at the records' arrival times): the
fast topic at a steady rate, the slow topic held back and written in bursts, so its records
arrive long after faster records with later event times — the disorder timesync undoes.

It runs in the timesync-sidecar image, which has the sidecar and its dependencies but not
``testkit``: compose mounts the checkout's ``testkit/`` beside this file (``/opt/demo``), where
Python finds it as the script's own directory:

    python demo_producer.py --bootstrap-servers kafka:9092 --fast-topic demo.fast --slow-topic demo.slow
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time

from testkit import kafka_io, workloads


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--fast-topic", default="demo.fast")
    parser.add_argument("--slow-topic", default="demo.slow")
    parser.add_argument("--rounds", type=int, default=0, help="rounds to write; 0 = until stopped")
    parser.add_argument("--round-seconds", type=float, default=10.0)
    parser.add_argument("--fast-rate", type=float, default=200.0, help="records/s on the fast topic")
    parser.add_argument("--slow-rate", type=float, default=2.0)
    parser.add_argument("--speed", type=float, default=1.0, help=">1 writes faster than real time")
    args = parser.parse_args(argv)
    if args.rounds < 0 or args.round_seconds <= 0 or args.fast_rate <= 0 or args.speed <= 0:
        parser.error(
            "--rounds must be >= 0 and --round-seconds, --fast-rate, --speed > 0 "
            f"(got {args.rounds}, {args.round_seconds}, {args.fast_rate}, {args.speed})"
        )
    return args


async def run(args: argparse.Namespace) -> int:
    """Write the rounds; returns how many records were written."""
    written = 0
    round_no = 0
    while args.rounds == 0 or round_no < args.rounds:
        events = workloads.skewed(
            args.fast_topic,
            args.slow_topic,
            base_ms=int(time.time() * 1000),
            duration_s=args.round_seconds,
            fast_rate=args.fast_rate,
            slow_rate=args.slow_rate,
            seed=round_no,
        )
        await kafka_io.produce(args.bootstrap_servers, events, paced=True, speed=args.speed)
        written += len(events)
        round_no += 1
        print(f"round {round_no}: {len(events)} records ({written} in total)", flush=True)
    return written


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
