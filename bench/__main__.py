"""``python -m bench``: the benchmark harness.

python -m bench run [--quick] [--out DIR] [--seed N] [--workloads a,b] [--no-spark] [--no-live] [--no-curves]
python -m bench core [--records N] [--quick] [--out DIR]
python -m bench extractors [--records N] [--repeats N] [--out DIR]
python -m bench readme [--results results/results.json] [--pending]
python -m bench ab --baseline REV [--records N] [--rounds N] [--out DIR]
python -m bench spark-knobs [--records N] [--keys N] [--out DIR]
python -m bench live --workloads a,b --idle 0,100,auto [--rounds N] [--out DIR]
python -m bench idle-backlog [--quick] [--rounds N] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys

from bench.commands import COMMANDS, command


def build_parser() -> argparse.ArgumentParser:
    """One subcommand per entry of :data:`bench.commands.COMMANDS`."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for each in COMMANDS:
        each.add_arguments(sub.add_parser(each.name, help=each.help, description=each.description))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return command(args.command).run(args, parser)


if __name__ == "__main__":
    sys.exit(main())
