"""Progress for long work: rich bars on a terminal, plain lines in CI or when output is piped.

CI sets ``CI=true`` and has no terminal; there a bar would either print nothing until the end
or flood the log with control codes, so each task prints a line when it starts, every
``every_s`` seconds while it runs, and when it ends.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class Task(Protocol):
    def update(self, completed: int) -> None: ...


def interactive() -> bool:
    return sys.stdout.isatty() and os.environ.get("CI", "").lower() not in {"1", "true", "yes"}


console = Console(highlight=False, force_terminal=None if interactive() else False)


class _LineTask:
    def __init__(self, label: str, total: int | None, every_s: float) -> None:
        self.label, self.total, self.every_s = label, total, every_s
        self.started = self.last = time.monotonic()
        self.completed = 0
        print(f"{label}: started", flush=True)

    def update(self, completed: int) -> None:
        self.completed = completed
        now = time.monotonic()
        if now - self.last >= self.every_s:
            self.last = now
            of = f"/{self.total}" if self.total else ""
            print(f"{self.label}: {completed}{of} ({now - self.started:.0f} s)", flush=True)

    def done(self) -> None:
        of = f"/{self.total}" if self.total else ""
        count = f" {self.completed}{of}" if self.total or self.completed else ""
        print(f"{self.label}: done{count} in {time.monotonic() - self.started:.1f} s", flush=True)


class _RichTask:
    def __init__(self, progress: Progress, label: str, total: int | None) -> None:
        self.progress = progress
        self.id = progress.add_task(label, total=total)

    def update(self, completed: int) -> None:
        self.progress.update(self.id, completed=completed)


@contextmanager
def track(label: str, total: int | None = None, every_s: float = 5.0) -> Iterator[Task]:
    """A progress task: ``with track("produce", total=n) as t: ... t.update(i)``."""
    if not interactive():
        task = _LineTask(label, total, every_s)
        try:
            yield task
        finally:
            task.done()
        return
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        rich_task = _RichTask(progress, label, total)
        yield rich_task
        if total is not None:
            rich_task.update(total)
