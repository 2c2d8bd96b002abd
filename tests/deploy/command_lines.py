"""Every ``timesync-sidecar`` / ``timesync-spark`` command line we ship, found where a user finds it.

A command line is shipped when a user can copy it or a container runs it:

- fenced code blocks of the Markdown docs (README.md, docs/*.md, deploy/README.md), with shell
  line continuations joined, comments and here-documents skipped;
- comment blocks of the YAML files (the spark-submit example at the top of a pod template);
- YAML ``command``/``args`` lists: Compose services and Kubernetes containers, resolved against
  the image's ``ENTRYPOINT``/``CMD`` in the Dockerfile, as a container runtime would;
- the Dockerfile's own default ``CMD`` of each image.

Each is returned as a :class:`CommandLine` (which program, its argv, where it was found), for the
tests to hand to the real parsers. The scanners are deliberately plain: a line that names one of
our programs but cannot be split like a shell would is an error, not a silent skip.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.conftest import CHART, DEPLOY, K8S, REPO

SIDECAR, SPARK = "timesync-sidecar", "timesync-spark"
DOCKERFILE = DEPLOY / "docker" / "Dockerfile"
COMPOSE = DEPLOY / "compose.yaml"

# The spark image's entrypoint hands these first words to Spark on Kubernetes, the rest to
# timesync-spark (deploy/docker/spark-entrypoint.sh).
SPARK_ENTRYPOINT = "/opt/timesync/spark-entrypoint.sh"
SPARK_K8S_MODES = ("driver", "executor")

# A line worth splitting: it names one of our programs as a word.
_CANDIDATE = re.compile(
    r"(?:^|[\s;&|(])(?:\S*/)?(?:timesync-sidecar|timesync-spark|spark_main\.py)(?=\s|$)"
    r"|-m\s+(?:sidecar|spark_consumer)(?=\s|$)"
)
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
_OPERATORS = {"|", "||", "&&", ";", "&"}
# Fenced blocks in these languages hold no shell.
_NOT_SHELL = {"json", "yaml", "yml", "properties", "python", "py", "promql", "toml", "ini"}


@dataclass(frozen=True)
class CommandLine:
    program: str  # SIDECAR or SPARK
    argv: tuple[str, ...]
    where: str  # path:line, or path: what

    def __str__(self) -> str:
        return f"{self.where}: {self.program} {shlex.join(self.argv)}"


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name


# --- shell text ------------------------------------------------------------------------------


def _logical_lines(lines: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """Join backslash continuations; drop here-document bodies. Yields (first line no, text)."""
    pending: list[str] = []
    start = 0
    heredoc: str | None = None
    for number, raw in lines:
        if heredoc is not None:
            if raw.strip() == heredoc:
                heredoc = None
            continue
        if not pending:
            start = number
        stripped = raw.rstrip()
        if stripped.endswith("\\"):
            pending.append(stripped[:-1])
            continue
        pending.append(stripped)
        text = " ".join(pending)
        pending = []
        m = _HEREDOC.search(text)
        if m:
            heredoc = m.group(2)
        yield start, text
    if pending:
        yield start, " ".join(pending)


def _simple_commands(words: list[str]) -> Iterator[list[str]]:
    current: list[str] = []
    for word in words:
        if word in _OPERATORS:
            if current:
                yield current
            current = []
        else:
            current.append(word)
    if current:
        yield current


def _ours(words: list[str]) -> tuple[str, list[str]] | None:
    """(program, argv) when this simple command runs one of our CLIs."""
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        words = words[1:]  # VAR=value prefixes
    if not words:
        return None
    name = words[0].rsplit("/", 1)[-1]
    if name in (SIDECAR, SPARK):
        return name, words[1:]
    if re.fullmatch(r"python(3(\.\d+)?)?", name) and len(words) > 2 and words[1] == "-m":
        module = {"sidecar": SIDECAR, "spark_consumer": SPARK}.get(words[2])
        return (module, words[3:]) if module else None
    for i, word in enumerate(words):
        if word.endswith("/spark_main.py"):  # spark-submit ... local:///opt/timesync/spark_main.py JOB ...
            return SPARK, words[i + 1 :]
    return None


def shell_commands(lines: list[tuple[int, str]], path: Path) -> Iterator[CommandLine]:
    for number, text in _logical_lines(lines):
        if not _CANDIDATE.search(text):
            continue
        try:
            words = shlex.split(text, comments=True)
        except ValueError as e:
            raise AssertionError(f"{_rel(path)}:{number}: cannot split {text!r} like a shell: {e}") from None
        for simple in _simple_commands(words):
            found = _ours(simple)
            if found:
                yield CommandLine(found[0], tuple(found[1]), f"{_rel(path)}:{number}")


def markdown_commands(path: Path) -> Iterator[CommandLine]:
    """Commands in the fenced code blocks of a Markdown file (not in prose or inline code)."""
    block: list[tuple[int, str]] | None = None
    language = ""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fence = re.match(r"\s*```(\w*)", line)
        if fence and block is None:
            block, language = [], fence.group(1).lower()
        elif fence:
            if language not in _NOT_SHELL:
                yield from shell_commands(block, path)
            block = None
        elif block is not None:
            block.append((number, line))


def comment_commands(path: Path) -> Iterator[CommandLine]:
    """Commands in the ``#`` comment lines of a YAML file or template (usage examples)."""
    lines = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        m = re.match(r"\s*#\s?(.*)", line)
        lines.append((number, m.group(1) if m else ""))
    yield from shell_commands(lines, path)


# --- the images ------------------------------------------------------------------------------


def dockerfile_stages() -> dict[str, dict[str, list[str]]]:
    """ENTRYPOINT and CMD (exec form) of each named stage of the Dockerfile."""
    stages: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for line in DOCKERFILE.read_text().splitlines():
        m = re.match(r"FROM\s+\S+\s+AS\s+(\S+)", line, flags=re.I)
        if m:
            current = stages.setdefault(m.group(1), {})
            continue
        m = re.match(r"(ENTRYPOINT|CMD)\s+(\[.*\])\s*$", line)
        if m:
            current[m.group(1)] = json.loads(m.group(2))
    return stages


# A shell entrypoint that prepares the environment and then hands its arguments to our CLI:
# ["/bin/sh", "-c", "...\nexec timesync-sidecar \"$@\"", "timesync-sidecar"].
_EXEC_ARGS = re.compile(r'exec (\S+) "\$@"\s*$')


def _program_of(entrypoint: list[str]) -> str | None:
    """Which of our CLIs an entrypoint runs (behind tini, a shell script that ends in
    ``exec <program> "$@"``, or the spark image's script)."""
    words = [w for w in entrypoint if w not in ("/usr/bin/tini", "--")]
    if not words:
        return None
    if words[:2] == ["/bin/sh", "-c"] and len(words) >= 3:
        handed = _EXEC_ARGS.search(words[2].replace("$$", "$"))
        words = [handed[1]] if handed else words
    if words[0].rsplit("/", 1)[-1] == SIDECAR:
        return SIDECAR
    if words[0] == SPARK_ENTRYPOINT:
        return SPARK
    return None


def _container_command(program: str | None, args: list[str], where: str) -> Iterator[CommandLine]:
    if program is None:
        return
    if program == SPARK and args[:1] and args[0] in SPARK_K8S_MODES:
        return  # Spark on Kubernetes' own protocol, not our CLI
    yield CommandLine(program, tuple(str(a) for a in args), where)


def image_defaults() -> Iterator[CommandLine]:
    """What each image runs with no arguments: ENTRYPOINT + CMD."""
    for name, stage in dockerfile_stages().items():
        if "ENTRYPOINT" in stage:
            program = _program_of(stage["ENTRYPOINT"])
            yield from _container_command(program, stage.get("CMD", []), f"{_rel(DOCKERFILE)}: stage {name}")


def _image_stage(image: str) -> str | None:
    """The Dockerfile stage an image name in a manifest stands for."""
    repo = image.split("@", maxsplit=1)[0].rsplit(":", 1)[0].rsplit("/", 1)[-1]
    return {"timesync-sidecar": "sidecar", "timesync": "sidecar", "timesync-spark": "spark"}.get(repo)


def compose_commands() -> Iterator[CommandLine]:
    stages = dockerfile_stages()
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    for name, service in services.items():
        build = service.get("build")
        stage = build.get("target") if isinstance(build, dict) else _image_stage(service.get("image", ""))
        if stage not in stages:
            continue
        entrypoint = service.get("entrypoint", stages[stage].get("ENTRYPOINT", []))
        if isinstance(entrypoint, str):
            entrypoint = shlex.split(entrypoint)
        command = service.get("command", stages[stage].get("CMD", []) if "entrypoint" not in service else [])
        if isinstance(command, str):
            command = shlex.split(command)
        yield from _container_command(_program_of(entrypoint), command, f"{_rel(COMPOSE)}: service {name}")


def pod_specs(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The pod specs of a Kubernetes object (a Pod, or a workload's pod template)."""
    kind = doc.get("kind")
    if kind == "Pod":
        yield doc["spec"]
    elif kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        yield doc["spec"]["template"]["spec"]
    elif kind == "CronJob":
        yield doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def manifest_commands(docs: list[dict[str, Any]], source: str) -> Iterator[CommandLine]:
    """``command``/``args`` of every container whose image is ours, as the kubelet runs them."""
    stages = dockerfile_stages()
    for doc in docs:
        for spec in pod_specs(doc):
            for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
                stage = _image_stage(container.get("image", ""))
                if stage is None:
                    continue
                entrypoint = container.get("command", stages[stage].get("ENTRYPOINT", []))
                default = stages[stage].get("CMD", []) if "command" not in container else []
                args = container.get("args", default)
                where = f"{source}: {doc['kind']} {doc['metadata']['name']} container {container['name']}"
                if stage == "spark" and "args" not in container and "command" not in container:
                    continue  # Spark on Kubernetes fills in the driver's and executors' arguments
                yield from _container_command(_program_of(entrypoint), args, where)


def k8s_documents() -> list[tuple[Path, dict[str, Any]]]:
    return [
        (path, doc)
        for path in sorted(K8S.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


def chart_template_args() -> Iterator[CommandLine]:
    """``args:`` of the chart's templates, read without helm: each must be a literal list.

    (The rendered chart is checked with helm too, under ``make deploy-check``.)"""
    for path in sorted((CHART / "templates").glob("*.yaml")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            m = re.match(r"\s*(args|command):\s*(.*)$", line)
            if not m:
                continue
            assert m.group(2).startswith("["), (
                f"{_rel(path)}:{number}: {m.group(1)} must be a literal list to be checked without helm"
            )
            assert m.group(1) == "args", f"{_rel(path)}:{number}: the chart must not replace the entrypoint"
            args = yaml.safe_load(m.group(2))
            yield CommandLine(SIDECAR, tuple(args), f"{_rel(path)}:{number}")


def markdown_files() -> list[Path]:
    return [REPO / "README.md", DEPLOY / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def yaml_files() -> list[Path]:
    return [
        COMPOSE,
        *sorted(K8S.glob("*.yaml")),
        *sorted((CHART / "templates").glob("*")),
        CHART / "values.yaml",
    ]


def shipped_commands() -> list[CommandLine]:
    """Every command line found in the shipped files, in a stable order."""
    found: list[CommandLine] = []
    for path in markdown_files():
        found.extend(markdown_commands(path))
    for path in yaml_files():
        found.extend(comment_commands(path))
    found.extend(image_defaults())
    found.extend(compose_commands())
    for path, doc in k8s_documents():
        found.extend(manifest_commands([doc], _rel(path)))
    found.extend(chart_template_args())
    return found
