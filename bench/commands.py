"""The subcommands of ``python -m bench``, in the order its ``--help`` lists them (:data:`COMMANDS`).

A new command is its two functions here (its arguments, what it runs) and one entry in
:data:`COMMANDS`; the contract and the shared helpers are :mod:`bench.command`'s.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from bench import idle_backlog, scenarios
from bench.command import (
    Command,
    comma_list,
    quiet_kafka_logs,
    stamp,
    unknown_workloads,
    workloads_error,
    write_outputs,
)
from bench.plan import RunFlags

RESULTS = Path("results")


# -- run: every system on every workload -------------------------------------------------------


def run_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument("--quick", action="store_true", help="small sizes and a subset of settings (< 3 min)")
    run.add_argument("--out", type=Path, default=RESULTS, help="output folder (default results/)")
    run.add_argument("--seed", type=int, default=42, help="seed of every workload generator")
    run.add_argument("--workloads", help=f"comma list out of {','.join(scenarios.NAMES)}")
    run.add_argument("--no-spark", action="store_true", help="skip the Spark part")
    run.add_argument("--no-live", action="store_true", help="skip the live workloads (latency, disorder)")
    run.add_argument("--no-curves", action="store_true", help="skip the cost curves")


def run_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    workloads = None
    if args.workloads:
        workloads = tuple(comma_list(args.workloads))
        unknown = unknown_workloads(list(workloads))
        if unknown:
            parser.error(workloads_error(unknown))
    flags = RunFlags(
        args.quick, args.seed, workloads, not args.no_spark, not args.no_live, not args.no_curves
    )
    return run_bench(flags, args.out)


def run_bench(flags: RunFlags, out: Path) -> int:
    """Run the benchmark and write results.json, report.md and the plots into ``out``."""
    import asyncio
    import time

    from bench import harness, plots, report
    from bench import plan as bench_plan
    from bench.progress import console
    from testkit.local_broker import kafka

    quiet_kafka_logs()
    plan = bench_plan.plan(flags)
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


# -- core, extractors: in-process, no broker ---------------------------------------------------


def core_arguments(core: argparse.ArgumentParser) -> None:
    core.add_argument("--records", type=int, default=1_000_000, help="records per configuration")
    core.add_argument("--quick", action="store_true", help="100k records per configuration")
    core.add_argument("--out", type=Path, default=RESULTS, help="where core.json and core.md go")
    core.add_argument(
        "--merge",
        type=_merges,
        default=(),
        help="take paths to run each configuration on, alternating: native,python (default: "
        "the process's, the C kernel when built)",
    )


def _merges(text: str) -> list[str]:
    """``--merge``: take paths, comma-separated, each ``native`` or ``python``."""
    names = comma_list(text)
    wrong = [n for n in names if n not in ("native", "python")]
    if wrong:
        raise argparse.ArgumentTypeError(f"--merge {text!r}: {', '.join(wrong)} is not native or python")
    return names


def core_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from bench import core as bench_core

    results = bench_core.run(args.records, args.quick, args.merge)
    return write_outputs(args.out, "core", bench_core.as_json(results), bench_core.report(results))


def extractors_arguments(ext: argparse.ArgumentParser) -> None:
    ext.add_argument("--records", type=int, default=200_000, help="records per extractor")
    ext.add_argument("--repeats", type=int, default=7, help="passes per extractor (the best counts)")
    ext.add_argument("--quick", action="store_true", help="3 passes over 20,000 records (a smoke run)")
    ext.add_argument("--out", type=Path, default=RESULTS, help="where extractors.json and .md go")


def extractors_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from bench import extractors
    from bench.report import extractors_section

    load_at_start = list(os.getloadavg())
    measured = extractors.run(20_000, 3) if args.quick else extractors.run(args.records, args.repeats)
    measured.update(stamp(bool(args.quick), load_at_start))
    return write_outputs(args.out, "extractors", measured, "\n".join(extractors_section(measured)))


def extractors_e2e_arguments(e2e: argparse.ArgumentParser) -> None:
    e2e.add_argument("--records", type=int, default=1_000_000, help="records per extractor")
    e2e.add_argument("--quick", action="store_true", help="100,000 records per extractor (a smoke run)")
    e2e.add_argument("--out", type=Path, default=RESULTS, help="where extractors_e2e.json and .md go")


def extractors_e2e_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import asyncio

    from bench import extractors_e2e
    from bench.demo_avro import registry
    from bench.report_sections import extractors_e2e_section
    from testkit.local_broker import kafka

    quiet_kafka_logs()
    n = 100_000 if args.quick else args.records
    logs = args.out / "extractors-e2e-logs"
    logs.mkdir(parents=True, exist_ok=True)
    load_at_start = list(os.getloadavg())
    with kafka() as bootstrap, registry() as registry_url:
        measured = asyncio.run(extractors_e2e.run(bootstrap, registry_url, n, logs))
    measured.update(stamp(bool(args.quick), load_at_start))
    load = ", ".join(f"{x:.2f}" for x in measured["load_average_at_end"])
    table = "\n".join([*extractors_e2e_section(measured), "", f"Load average at the end: {load}."])
    return write_outputs(args.out, "extractors_e2e", measured, table)


# -- ab: this checkout against another revision ------------------------------------------------


def ab_arguments(ab: argparse.ArgumentParser) -> None:
    ab.add_argument("--baseline", required=True, metavar="REV", help="the revision to compare with")
    ab.add_argument("--records", type=int, default=1_000_000, help="records per backlog (default 1,000,000)")
    ab.add_argument("--rounds", type=int, default=3, help="rounds of every setting on both sides (default 3)")
    ab.add_argument("--out", type=Path, default=RESULTS, help="where ab.json and ab.md go")


def ab_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """``bench ab``: prepare the baseline, run both sidecars, write ab.json and ab.md."""
    import asyncio

    from bench import ab
    from testkit.local_broker import kafka

    if args.records < 1000 or args.rounds < 1:
        parser.error("ab: --records must be at least 1000 and --rounds at least 1")
    try:
        baseline = ab.checkout(args.baseline)
    except ab.BaselineError as e:
        print(f"bench ab: {e}", file=sys.stderr)
        return 1
    quiet_kafka_logs()
    args.out.mkdir(parents=True, exist_ok=True)
    with kafka() as bootstrap:
        results = asyncio.run(ab.run(bootstrap, baseline, args.baseline, args.records, args.rounds, args.out))
    return write_outputs(args.out, "ab", results, ab.markdown(results))


# -- live: chosen idle settings on chosen live workloads, in rounds ----------------------------


def live_arguments(live: argparse.ArgumentParser) -> None:
    live.add_argument("--workloads", required=True, help=f"comma list out of {','.join(scenarios.NAMES)}")
    live.add_argument("--idle", required=True, help="comma list of max.task.idle.ms values, e.g. 0,100,auto")
    live.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    live.add_argument("--out", type=Path, default=RESULTS, help="where live-rounds.json and .md go")


def live_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """``bench live``: the chosen settings on the chosen workloads, in rounds, on one broker."""
    import asyncio

    from bench import live_rounds
    from testkit.local_broker import kafka

    names = comma_list(args.workloads)
    unknown = unknown_workloads(names)
    idles = comma_list(args.idle)
    if unknown or not names:
        parser.error(workloads_error(unknown))
    if not idles or args.rounds < 1:
        parser.error("live: give --idle values and --rounds of at least 1")
    quiet_kafka_logs()
    args.out.mkdir(parents=True, exist_ok=True)
    with kafka() as bootstrap:
        results = asyncio.run(live_rounds.run(bootstrap, names, idles, args.rounds, args.out))
    return write_outputs(args.out, "live-rounds", results, live_rounds.markdown(results))


# -- spark-knobs: the Spark jobs at other micro-batch sizes ------------------------------------


def spark_knobs_arguments(knobs: argparse.ArgumentParser) -> None:
    knobs.add_argument("--records", type=int, default=500_000, help="orders and payments (default 500,000)")
    knobs.add_argument("--keys", type=int, default=5_000, help="customers (default 5,000)")
    knobs.add_argument("--out", type=Path, default=RESULTS, help="where spark-knobs.json and .md go")


def spark_knobs_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """``bench spark-knobs``: one session, one ordered backlog, every job at every setting."""
    import asyncio

    from bench import spark_knobs
    from spark_consumer.session import SessionOptions, get_session
    from testkit.local_broker import kafka

    quiet_kafka_logs()
    args.out.mkdir(parents=True, exist_ok=True)
    with kafka() as bootstrap:
        spark = get_session(
            SessionOptions(
                master="local[2]",
                app_name="timesync-bench-knobs",
                conf={"spark.sql.streaming.numRecentProgressUpdates": "10000"},
            )
        )
        try:
            results = asyncio.run(spark_knobs.run(bootstrap, spark, args.records, args.keys, args.out))
        finally:
            spark.stop()
    return write_outputs(args.out, "spark-knobs", results, spark_knobs.markdown(results))


# -- readme: the READMEs' generated blocks from one full run -----------------------------------


def readme_arguments(readme: argparse.ArgumentParser) -> None:
    readme.add_argument("--results", type=Path, default=RESULTS / "results.json")
    readme.add_argument("--pending", action="store_true", help="write the 'no full run recorded' text")
    readme.add_argument(
        "--extractors",
        type=Path,
        metavar="DIR",
        help="rewrite only the extractors block, from DIR/extractors.json and DIR/extractors_e2e.json "
        "(python -m bench extractors and extractors-e2e at their full sizes)",
    )


def readme_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from bench import readmes

    repo = Path(__file__).resolve().parents[1]
    if args.extractors is not None:
        runs = [
            json.loads((args.extractors / f"{stem}.json").read_text())
            for stem in ("extractors", "extractors_e2e")
        ]
        if any(run.get("quick", True) for run in runs):
            print(f"{args.extractors}: a --quick run (or one before its stamp): READMEs left alone")
            return 0
        for path in readmes.update_extractor_block(runs[0], runs[1], repo):
            print(f"rewritten: {path.relative_to(repo)}")
        return 0
    results = None
    if not args.pending:
        results = json.loads(args.results.read_text())
        if results.get("quick"):
            print(f"{args.results} is a --quick run: its figures are not measurements; READMEs left alone")
            return 0
        if not results.get("workloads") or results.get("curves") is None or results.get("spark") is None:
            print(f"{args.results} is a partial run (--no-live/--no-curves/--no-spark): READMEs left alone")
            return 0
    for path in readmes.update_readmes(results, repo, args.results.parent):
        print(f"rewritten: {path.relative_to(repo)}")
    return 0


COMMANDS: tuple[Command, ...] = (
    Command(
        "run",
        "every system on every workload: results.json, report.md and plots",
        run_arguments,
        run_command,
        description="Latency versus ordering and throughput: the raw passthrough, timesync and Kafka "
        "Streams at each max.task.idle.ms, and the offline optimum, on one broker (KAFKA_BOOTSTRAP_SERVERS, "
        "else a local one started here). See bench/README.md.",
    ),
    Command("core", "records/s through MergeTask alone (no broker)", core_arguments, core_command),
    Command(
        "extractors",
        "CPU per record of timestamp.extractor record, json:, avro:, protobuf: (no broker)",
        extractors_arguments,
        extractors_command,
    ),
    Command(
        "extractors-e2e",
        "records/s and CPU per record of the sidecar draining record, json:, avro:, protobuf: values",
        extractors_e2e_arguments,
        extractors_e2e_command,
        description="The sidecar as a process on one broker (KAFKA_BOOTSTRAP_SERVERS, else a local one) "
        "and a registry (SCHEMA_REGISTRY_URL, else a local Apicurio), draining the same ~250 B records "
        "with each timestamp.extractor in turn. Writes extractors_e2e.json and .md. See bench/README.md.",
    ),
    Command(
        "ab",
        "this checkout's sidecar against another revision's, alternating in one run (throughput)",
        ab_arguments,
        ab_command,
        description="Before/after: the throughput phase's timesync settings, this checkout's sidecar and "
        "REV's (its tree and venv prepared once in .cache/bench-ab/), draining the same backlogs in "
        "alternating rounds on one broker. Writes ab.json and ab.md. See bench/README.md.",
    ),
    Command(
        "live",
        "chosen timesync idle settings on chosen live workloads, in rounds (bench/live_rounds.py)",
        live_arguments,
        live_command,
    ),
    Command(
        "spark-knobs",
        "join and aggregate at other micro-batch sizes and shuffle partitions (bench/spark_knobs.py)",
        spark_knobs_arguments,
        spark_knobs_command,
    ),
    Command(
        idle_backlog.COMMAND,
        idle_backlog.HELP,
        idle_backlog.add_arguments,
        idle_backlog.run_command,
        description=idle_backlog.DESCRIPTION,
    ),
    Command(
        "readme",
        "rewrite the generated blocks of README.md, bench/README.md and deploy/README.md",
        readme_arguments,
        readme_command,
        description="Rewrite every <!-- bench:NAME --> block of the READMEs from one full run's "
        "results.json and copy its figures into bench/figures/. A quick run's results are refused "
        "(its figures are not measurements); --pending writes the 'no full run yet' text instead.",
    ),
)


def command(name: str) -> Command:
    """The command named ``name`` (one argparse already accepted as a subcommand)."""
    return next(c for c in COMMANDS if c.name == name)
