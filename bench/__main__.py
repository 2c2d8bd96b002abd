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
import json
import sys
from pathlib import Path
from typing import Any

from bench import idle_backlog, scenarios


def run_bench(
    quick: bool,
    out: Path,
    seed: int,
    workloads: list[str] | None,
    spark: bool,
    live: bool = True,
    curves: bool = True,
) -> int:
    """Run the benchmark and write results.json, report.md and the plots into ``out``."""
    import asyncio
    import time

    from bench import harness, plots, report
    from bench import plan as bench_plan
    from bench.progress import console
    from testkit.local_broker import kafka

    quiet_kafka_logs()
    plan = bench_plan.plan(quick, seed, workloads, spark, live, curves)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    console.print("[bold]timesync bench[/]: starting the broker (KAFKA_BOOTSTRAP_SERVERS or a local one)…")
    with kafka() as bootstrap:
        console.print(f"broker {bootstrap} ready after {time.monotonic() - started:.1f} s")
        results = asyncio.run(harness.run(bootstrap, plan, out))
    results["wall_s_including_broker"] = round(time.monotonic() - started, 1)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    paths = plots.plots(results, out)
    (out / "report.md").write_text(report.markdown(results, paths))
    console.print(report.markdown(results).split("## Throughput")[0])
    console.print(f"written: {out / 'results.json'}, {out / 'report.md'}, {len(paths)} plots in {out}")
    return 0


def write_outputs(out: Path, stem: str, results: Any, table: str) -> int:
    """``<stem>.json`` and ``<stem>.md`` into ``out``; the table and where they went, on the console."""
    from bench.progress import console

    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / f"{stem}.md").write_text(table if table.endswith("\n") else table + "\n")
    console.print(table)
    console.print(f"written: {out / f'{stem}.json'}, {out / f'{stem}.md'}")
    return 0


def quiet_kafka_logs() -> None:
    import logging

    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)


def run_ab(rev: str, records: int, rounds: int, out: Path, parser: argparse.ArgumentParser) -> int:
    """``bench ab``: prepare the baseline, run both sidecars, write ab.json and ab.md."""
    import asyncio

    from bench import ab
    from testkit.local_broker import kafka

    if records < 1000 or rounds < 1:
        parser.error("ab: --records must be at least 1000 and --rounds at least 1")
    try:
        baseline = ab.checkout(rev)
    except ab.BaselineError as e:
        print(f"bench ab: {e}", file=sys.stderr)
        return 1
    quiet_kafka_logs()
    out.mkdir(parents=True, exist_ok=True)
    with kafka() as bootstrap:
        results = asyncio.run(ab.run(bootstrap, baseline, rev, records, rounds, out))
    return write_outputs(out, "ab", results, ab.markdown(results))


def run_live_rounds(workloads: list[str], idles: list[str], rounds: int, out: Path) -> int:
    """``bench live``: the chosen settings on the chosen workloads, in rounds, on one broker."""
    import asyncio

    from bench import live_rounds
    from testkit.local_broker import kafka

    quiet_kafka_logs()
    out.mkdir(parents=True, exist_ok=True)
    with kafka() as bootstrap:
        results = asyncio.run(live_rounds.run(bootstrap, workloads, idles, rounds, out))
    return write_outputs(out, "live-rounds", results, live_rounds.markdown(results))


def run_spark_knobs(records: int, keys: int, out: Path) -> int:
    """``bench spark-knobs``: one session, one ordered backlog, every job at every setting."""
    import asyncio

    from bench import spark_knobs
    from spark_consumer.session import SessionOptions, get_session
    from testkit.local_broker import kafka

    quiet_kafka_logs()
    out.mkdir(parents=True, exist_ok=True)
    with kafka() as bootstrap:
        spark = get_session(
            SessionOptions(
                master="local[2]",
                app_name="timesync-bench-knobs",
                conf={"spark.sql.streaming.numRecentProgressUpdates": "10000"},
            )
        )
        try:
            results = asyncio.run(spark_knobs.run(bootstrap, spark, records, keys, out))
        finally:
            spark.stop()
    return write_outputs(out, "spark-knobs", results, spark_knobs.markdown(results))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="every system on every workload: results.json, report.md and plots",
        description="Latency versus ordering and throughput: the raw passthrough, timesync and Kafka "
        "Streams at each max.task.idle.ms, and the offline optimum, on one broker (KAFKA_BOOTSTRAP_SERVERS, "
        "else a local one started here). See bench/README.md.",
    )
    run.add_argument("--quick", action="store_true", help="small sizes and a subset of settings (< 3 min)")
    run.add_argument("--out", type=Path, default=Path("results"), help="output folder (default results/)")
    run.add_argument("--seed", type=int, default=42, help="seed of every workload generator")
    run.add_argument("--workloads", help=f"comma list out of {','.join(scenarios.NAMES)}")
    run.add_argument("--no-spark", action="store_true", help="skip the Spark part")
    run.add_argument("--no-live", action="store_true", help="skip the live workloads (latency, disorder)")
    run.add_argument("--no-curves", action="store_true", help="skip the cost curves")
    core = sub.add_parser("core", help="records/s through MergeTask alone (no broker)")
    core.add_argument("--records", type=int, default=1_000_000, help="records per configuration")
    core.add_argument("--quick", action="store_true", help="100k records per configuration")
    core.add_argument("--out", type=Path, default=Path("results"), help="where core.json and core.md go")
    ext = sub.add_parser(
        "extractors",
        help="CPU per record of timestamp.extractor record, json:, avro:, protobuf: (no broker)",
    )
    ext.add_argument("--records", type=int, default=200_000, help="records per extractor")
    ext.add_argument("--repeats", type=int, default=7, help="passes per extractor (the best counts)")
    ext.add_argument("--out", type=Path, default=Path("results"), help="where extractors.json and .md go")
    ab = sub.add_parser(
        "ab",
        help="this checkout's sidecar against another revision's, alternating in one run (throughput)",
        description="Before/after: the throughput phase's timesync settings, this checkout's sidecar and "
        "REV's (its tree and venv prepared once in .cache/bench-ab/), draining the same backlogs in "
        "alternating rounds on one broker. Writes ab.json and ab.md. See bench/README.md.",
    )
    ab.add_argument("--baseline", required=True, metavar="REV", help="the revision to compare with")
    ab.add_argument("--records", type=int, default=1_000_000, help="records per backlog (default 1,000,000)")
    ab.add_argument("--rounds", type=int, default=3, help="rounds of every setting on both sides (default 3)")
    ab.add_argument("--out", type=Path, default=Path("results"), help="where ab.json and ab.md go")
    live = sub.add_parser(
        "live",
        help="chosen timesync idle settings on chosen live workloads, in rounds (bench/live_rounds.py)",
    )
    live.add_argument("--workloads", required=True, help=f"comma list out of {','.join(scenarios.NAMES)}")
    live.add_argument("--idle", required=True, help="comma list of max.task.idle.ms values, e.g. 0,100,auto")
    live.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    live.add_argument("--out", type=Path, default=Path("results"), help="where live-rounds.json and .md go")
    knobs = sub.add_parser(
        "spark-knobs",
        help="join and aggregate at other micro-batch sizes and shuffle partitions (bench/spark_knobs.py)",
    )
    knobs.add_argument("--records", type=int, default=500_000, help="orders and payments (default 500,000)")
    knobs.add_argument("--keys", type=int, default=5_000, help="customers (default 5,000)")
    knobs.add_argument("--out", type=Path, default=Path("results"), help="where spark-knobs.json and .md go")
    idle_backlog.add_arguments(
        sub.add_parser(idle_backlog.COMMAND, help=idle_backlog.HELP, description=idle_backlog.DESCRIPTION)
    )
    readme = sub.add_parser(
        "readme",
        help="rewrite the generated blocks of README.md, bench/README.md and deploy/README.md",
        description="Rewrite every <!-- bench:NAME --> block of the READMEs from one full run's "
        "results.json and copy its figures into bench/figures/. A quick run's results are refused "
        "(its figures are not measurements); --pending writes the 'no full run yet' text instead.",
    )
    readme.add_argument("--results", type=Path, default=Path("results") / "results.json")
    readme.add_argument("--pending", action="store_true", help="write the 'no full run recorded' text")
    args = parser.parse_args(argv)

    if args.command == "readme":
        from bench import readmes

        repo = Path(__file__).resolve().parents[1]
        results = None
        if not args.pending:
            results = json.loads(args.results.read_text())
            if results.get("quick"):
                print(
                    f"{args.results} is a --quick run: its figures are not measurements; READMEs left alone"
                )
                return 0
            if not results.get("workloads") or results.get("curves") is None or results.get("spark") is None:
                print(
                    f"{args.results} is a partial run (--no-live/--no-curves/--no-spark): READMEs left alone"
                )
                return 0
        for path in readmes.update_readmes(results, repo, args.results.parent):
            print(f"rewritten: {path.relative_to(repo)}")
        return 0

    if args.command == "run":
        workloads = None
        if args.workloads:
            workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
            unknown = [w for w in workloads if w not in scenarios.NAMES]
            if unknown:
                parser.error(
                    f"--workloads: unknown {', '.join(unknown)}; known: {', '.join(scenarios.NAMES)}"
                )
        return run_bench(
            args.quick,
            args.out,
            args.seed,
            workloads,
            not args.no_spark,
            not args.no_live,
            not args.no_curves,
        )

    if args.command == "live":
        names = [w.strip() for w in args.workloads.split(",") if w.strip()]
        unknown = [w for w in names if w not in scenarios.NAMES]
        idles = [i.strip() for i in args.idle.split(",") if i.strip()]
        if unknown or not names:
            parser.error(f"--workloads: unknown {', '.join(unknown)}; known: {', '.join(scenarios.NAMES)}")
        if not idles or args.rounds < 1:
            parser.error("live: give --idle values and --rounds of at least 1")
        return run_live_rounds(names, idles, args.rounds, args.out)

    if args.command == idle_backlog.COMMAND:
        return idle_backlog.run_command(args, parser)

    if args.command == "spark-knobs":
        return run_spark_knobs(args.records, args.keys, args.out)

    if args.command == "ab":
        return run_ab(args.baseline, args.records, args.rounds, args.out, parser)

    if args.command == "extractors":
        from bench import extractors
        from bench.report import extractors_section

        measured = extractors.run(args.records, args.repeats)
        return write_outputs(args.out, "extractors", measured, "\n".join(extractors_section(measured)))

    if args.command == "core":
        from bench import core as bench_core

        results = bench_core.run(args.records, args.quick)
        return write_outputs(args.out, "core", bench_core.as_json(results), bench_core.report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
