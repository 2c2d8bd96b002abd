"""CPU time of a process and its descendants, read from ``/proc`` (Linux).

Used for the Spark JVM: in ``local[2]`` the driver runs every task, and its Python workers
(``pyspark.daemon`` and the workers it forks) are its descendants. A descendant that exits is
counted in its parent's ``cutime``/``cstime`` once reaped, so the sum over the live tree keeps
what the dead ones used (up to a child not yet reaped when it is read).
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def stat_cpu_ticks(stat: str) -> int:
    """utime + stime + cutime + cstime (clock ticks) of one ``/proc/<pid>/stat`` line.

    The command name (field 2) is in parentheses and may hold spaces or parentheses itself, so
    fields are counted after its last ``)``: state is field 3, utime..cstime fields 14..17."""
    rest = stat[stat.rindex(")") + 2 :].split()
    return sum(int(x) for x in rest[11:15])


def children(pid: int, proc: Path = PROC) -> list[int]:
    """The pids of ``pid``'s children (from every thread's ``children`` file); none once it has
    exited."""
    out: list[int] = []
    try:
        tasks = list((proc / str(pid) / "task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def tree_cpu_s(pid: int, proc: Path = PROC) -> float:
    """CPU seconds of ``pid`` and its live descendants (see the module docstring); a process that
    exits while it is read counts 0."""
    ticks, todo, seen = 0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            ticks += stat_cpu_ticks((proc / str(p) / "stat").read_text())
        except (OSError, ValueError):
            continue
        todo += children(p, proc)
    return ticks / os.sysconf("SC_CLK_TCK")


def spark_jvm_child(pid: int | None = None, proc: Path = PROC) -> int | None:
    """The first child of ``pid`` (this process by default) that is a JVM running Spark's
    ``SparkSubmit`` (the one pyspark starts for its py4j gateway) — not any ``java`` child: the
    bench's local broker is one too."""
    for child in children(os.getpid() if pid is None else pid, proc):
        try:
            cmdline = (proc / str(child) / "cmdline").read_bytes()
        except OSError:
            continue
        if b"org.apache.spark.deploy.SparkSubmit" in cmdline:
            return child
    return None
