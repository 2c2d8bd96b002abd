"""``python -m bench``: the benchmark harness, and the demo.

python -m bench core [--records N] [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    core = sub.add_parser("core", help="records/s through MergeTask alone (no broker)")
    core.add_argument("--records", type=int, default=1_000_000, help="records per configuration")
    core.add_argument("--quick", action="store_true", help="100k records per configuration")
    core.add_argument("--out", type=Path, default=Path("results"), help="where core.json and core.md go")
    args = parser.parse_args(argv)

    if args.command == "core":
        from bench import core as bench_core
        from bench.progress import console

        results = bench_core.run(args.records, args.quick)
        table = bench_core.report(results)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "core.json").write_text(json.dumps(bench_core.as_json(results), indent=2))
        (args.out / "core.md").write_text(table + "\n")
        console.print(table)
        console.print(f"written: {args.out / 'core.json'}, {args.out / 'core.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
