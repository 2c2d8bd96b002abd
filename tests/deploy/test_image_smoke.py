"""The two images, built and run without a Docker engine: what ``deploy/docker/Dockerfile`` does.

Step for step, in a temporary directory standing for the image's file system:

1. the build context: the files the ``build`` stage COPYs (read from the Dockerfile);
2. ``python -m build --sdist``, then ``pip wheel`` *from that sdist* (the ``build`` stage);
3. a fresh venv with that wheel (the sidecar image's ``/opt/venv``), and another with the wheel's
   ``[spark]`` extra (``build-spark``); the connector jars (``make jars``, from the same pom the
   ``jars`` stage uses) copied into pyspark's own ``jars/``, and ``/opt/spark`` linked to it;
4. each image's environment, read from its ``ENV`` lines (``/opt/...`` mapped into the temporary
   directory, Java from this machine), plus what a Kubernetes pod adds: the service-link
   variables of every Service we ship (``deploy/k8s`` and the chart, see ``service_links.py``);
5. each image's ENTRYPOINT and CMD against the test broker: the sidecar until its HEALTHCHECK
   script says healthy and it has merged the input; then the Spark job through the spark
   image's entrypoint script, ``aggregate ... --trigger available-now``, to completion.

So a file missing from the sdist, a service-link variable taken for a config key, or a Spark job
that looks for its connector anywhere but on Spark's classpath fails here, as it would in the
images. Where this differs from Docker, and why:

- The builds do not use build isolation and pip installs from a local wheelhouse
  (``.cache/wheelhouse``, filled from PyPI on the first run; pyspark comes from pip's wheel
  cache, which ``make venv`` filled): the test must be fast and must not download pyspark's
  400 MB sdist each time. The venvs are still fresh, not ``--system-site-packages``: a
  dependency missing from ``pyproject.toml`` fails the import.
- ``TIMESYNC_HTTP_PORT`` is set to a free port (as ``docker run -e`` would), not the image's
  8080, which another process on a shared machine may hold; tini is not used.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sidecar.kafka.admin import TopicSpec
from testkit.kafka_io import create_topics, produce, read_topics
from testkit.sidecar_process import free_port
from testkit.workloads import Event
from tests.deploy.conftest import DEPLOY, REPO
from tests.deploy.service_links import service_link_env, shipped_services
from tests.deploy.test_docker import DOCKERFILE, instruction, stages

pytestmark = pytest.mark.slow

WHEELHOUSE = REPO / ".cache" / "wheelhouse"
SPARK_JARS = REPO / ".cache" / "jars" / "spark"
#: The PATH of the python:3.11-slim base image, which the Dockerfile's ENV PATH extends.
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Left out of the build context as Dockerfile.dockerignore says: a local build's artefacts.
#: The image's absolute paths that the Dockerfile's ENV, ENTRYPOINT, CMD and HEALTHCHECK name.
IMAGE_PATH = re.compile(r"(?<![\w/.])(?:/opt/java/openjdk|/(?:opt|etc|tmp)(?=/|$|:))")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "_stamp_encoder.c")


def checked(cmd: list[str], *, timeout: float = 600, **kw: Any) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    assert result.returncode == 0, f"{shlex.join(cmd)} exited {result.returncode}:\n{result.stderr[-3000:]}"
    return result


# -- the image's file system -------------------------------------------------------------------


@dataclass
class Root:
    """A temporary directory standing for the image's ``/``: maps the Dockerfile's paths into it."""

    path: Path

    def __call__(self, image_path: str) -> Path:
        return self.path / image_path.lstrip("/")

    def remap(self, text: str, java_home: str) -> str:
        """``text`` (from the Dockerfile) with the image's paths in this root (Java: the host's)."""

        def one(match: re.Match[str]) -> str:
            return java_home if match[0] == "/opt/java/openjdk" else str(self.path) + match[0]

        return IMAGE_PATH.sub(one, text)


def host_java_home() -> str:
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    assert java, "java not found: the Spark image needs a Java 17 runtime"
    return str(Path(java).resolve().parents[1])


def image_env(stage_names: tuple[str, ...], root: Root, extra: Mapping[str, str]) -> dict[str, str]:
    """The ENV of ``stage_names`` (in order, later wins), mapped into ``root``, plus ``extra``."""
    env = {"PATH": BASE_PATH, "HOME": str(root("/tmp")), "LANG": "C.UTF-8"}
    all_stages = stages()
    java_home = host_java_home()
    for name in stage_names:
        for args in instruction(all_stages[name], "ENV"):
            for pair in shlex.split(args):
                key, _, value = pair.partition("=")
                value = value.replace("$PATH", env["PATH"]).replace("${PATH}", env["PATH"])
                env[key] = root.remap(value, java_home)
    return {**env, **extra}


def image_command(stage: str, root: Root, args: list[str] | None = None) -> list[str]:
    """ENTRYPOINT + (``args`` or CMD) of ``stage``, as exec-form JSON in the Dockerfile."""
    lines = stages()[stage]
    (entrypoint,) = instruction(lines, "ENTRYPOINT")
    (cmd,) = instruction(lines, "CMD")
    java_home = host_java_home()
    image_argv = [
        root.remap(a, java_home) for a in json.loads(entrypoint) if a not in {"/usr/bin/tini", "--"}
    ]
    return image_argv + (args if args is not None else [root.remap(a, java_home) for a in json.loads(cmd)])


def copy_from_context(stage: str, root: Root, workdir: str) -> None:
    """The stage's ``COPY <context paths> <dest>`` (not ``--from``), into ``root``."""
    for args in instruction(stages()[stage], "COPY"):
        if args.startswith("--"):
            continue
        *sources, dest = args.split()
        target = root(dest) if dest.startswith("/") else root(workdir) / dest
        for source in sources:
            src = REPO / source
            if src.is_dir():
                shutil.copytree(src, target, ignore=IGNORED, dirs_exist_ok=True)
            else:
                into = target / src.name if dest.endswith("/") or len(sources) > 1 else target
                into.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, into)


# -- the builds --------------------------------------------------------------------------------


@dataclass
class Dist:
    sdist: Path
    wheel: Path


def pip_install(venv: Path, *requirements: str) -> None:
    """``pip install`` into ``venv`` from the local wheelhouse, filling it from PyPI if need be."""
    # This venv's pip, run for the fresh venv (`pip --python`): saves bootstrapping pip into it.
    # --no-compile: byte-compiling pyspark's thousands of files costs more than it saves here.
    python = str(venv / "bin" / "python")
    offline = [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-compile"]
    offline += ["--no-index", "--find-links", str(WHEELHOUSE)]
    first = subprocess.run([*offline, *requirements], capture_output=True, text=True, timeout=900)
    if first.returncode == 0:
        return
    # First run on this machine (or new dependencies): resolve from the index into the wheelhouse.
    # pip reuses the wheels in its cache (pyspark's, built by `make venv`).
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    checked(
        [sys.executable, "-m", "pip", "wheel", "-q", "--wheel-dir", str(WHEELHOUSE), *requirements],
        timeout=1800,
    )
    for own in WHEELHOUSE.glob("timesync-*"):
        own.unlink()  # the wheel under test is given by path, never picked from here
    checked([*offline, *requirements], timeout=900)


def fresh_venv(path: Path) -> Path:
    checked([sys.executable, "-m", "venv", "--without-pip", str(path)], timeout=120)
    return path


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Root:
    return Root(tmp_path_factory.mktemp("image"))


@pytest.fixture(scope="module")
def dist(root: Root) -> Dist:
    """The ``build`` stage: the context copied to /src, the sdist, the wheel built from it."""
    copy_from_context("build", root, "/src")
    out = root("/dist")
    # The extensions are compiled unoptimised: this test asks whether the sdist builds and the
    # image runs, not how fast (gcc -O0 takes a third of -O2's time on the C that Cython writes).
    env = {**os.environ, "CFLAGS": f"{os.environ.get('CFLAGS', '')} -O0".strip()}
    checked(
        [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(out), str(root("/src"))],
        env=env,
    )
    (sdist,) = out.glob("timesync-*.tar.gz")
    # From the sdist alone, in a directory of its own: nothing of the checkout can leak in.
    checked(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(sdist),
        ],
        cwd=out,
        env=env,
    )
    (wheel,) = out.glob("timesync-*.whl")
    return Dist(sdist, wheel)


@pytest.fixture(scope="module")
def sidecar_venv(root: Root, dist: Dist) -> Path:
    """The sidecar image's /opt/venv: the wheel and its dependencies, in a fresh venv."""
    venv = fresh_venv(root.path / "sidecar-image" / "opt" / "venv")
    pip_install(venv, str(dist.wheel))
    return venv


@pytest.fixture(scope="module")
def spark_root(root: Root, dist: Dist) -> Root:
    """The spark image: /opt/venv with ``[spark]``, the connector in pyspark's jars/, /opt/spark."""
    image = Root(root.path / "spark-image")
    venv = fresh_venv(image("/opt/venv"))
    pip_install(venv, f"{dist.wheel}[spark]")
    if not list(SPARK_JARS.glob("spark-sql-kafka-0-10_2.13-*.jar")):
        pytest.fail(f"no connector jars in {SPARK_JARS}: run `make jars`")
    # RUN spark_home="$(python -c '...pyspark...')" && cp /tmp/spark-kafka-jars/*.jar "$spark_home/jars/"
    spark_home = checked(
        [str(venv / "bin" / "python"), "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"]
    ).stdout.strip()
    for jar in SPARK_JARS.glob("*.jar"):
        shutil.copy2(jar, Path(spark_home) / "jars")
    image("/opt/spark").symlink_to(spark_home)  # && ln -s "$spark_home" /opt/spark
    copy_from_context("spark", image, "/tmp")  # spark-entrypoint.sh, spark_main.py
    image("/tmp").mkdir(exist_ok=True)
    return image


# -- the tests ---------------------------------------------------------------------------------


def test_the_sdist_holds_the_encoder_source_and_the_licence(dist: Dist) -> None:
    names = checked(["tar", "tzf", str(dist.sdist)]).stdout.split()
    top = names[0].split("/")[0]
    for needed in (
        "LICENSE",
        "sidecar/output/_stamp_encoder.pyx",
        "sidecar/kafka/_fetched.pyx",
        "sidecar/kafka/_records.pyx",
        "sidecar/kafka/_records.pxd",
        "timesync_wire/formats/_avro_plan.pyx",
        "timesync_wire/_zigzag.pxd",
        "timesync_wire/formats/_json_scan.pyx",
        "timesync_wire/formats/_json_tokens.pxd",
        "timesync_wire/formats/_protobuf_plan.pyx",
        "timesync_wire/formats/_wire_reads.pxd",
        "spark_consumer/log4j2.properties",
    ):
        assert f"{top}/{needed}" in names


def test_the_wheel_ships_the_wire_layer_sidecar_and_spark_consumer_only(dist: Dist) -> None:
    import zipfile

    names = zipfile.ZipFile(dist.wheel).namelist()
    assert {n.split("/")[0] for n in names} == {
        "timesync_wire",
        "sidecar",
        "spark_consumer",
        "timesync-0.1.0.dist-info",
    }
    assert any(n.startswith("sidecar/output/_stamp_encoder.") and n.endswith(".so") for n in names)
    assert "timesync-0.1.0.dist-info/licenses/LICENSE" in names


def test_both_console_scripts_run_from_a_fresh_venv(sidecar_venv: Path, root: Root) -> None:
    env = {"PATH": f"{sidecar_venv / 'bin'}:{BASE_PATH}", "HOME": str(root.path)}
    version = checked([str(sidecar_venv / "bin" / "timesync-sidecar"), "--version"], env=env, cwd=root.path)
    assert version.stdout.strip() == "timesync 0.1.0"
    usage = checked([str(sidecar_venv / "bin" / "timesync-spark"), "--help"], env=env, cwd=root.path)
    assert "aggregate" in usage.stdout
    # The keys' meanings are their fields' docstrings: read from the installed sources, not the checkout.
    keys = checked(
        [str(sidecar_venv / "bin" / "timesync-sidecar"), "config", "max.task.idle.ms"], env=env, cwd=root.path
    )
    assert "-1, 0, N, max, auto" in keys.stdout
    assert "learnt per partition" in keys.stdout
    # The compiled encoder, not the pure-Python fallback, and from the venv, not the checkout.
    where = checked(
        [
            str(sidecar_venv / "bin" / "python"),
            "-I",
            "-c",
            "import sidecar.output._stamp_encoder as e; print(e.__file__)",
        ],
        env=env,
        cwd=root.path,
    )
    assert where.stdout.startswith(str(sidecar_venv))


@dataclass
class Flow:
    inputs: list[str]
    ordered: str
    aggregated: str
    records: int


@pytest.fixture(scope="module")
def flow(bootstrap: str) -> Flow:
    """Two input topics with 20 JSON records of one key, 100 ms apart, a minute ago."""
    run = os.urandom(4).hex()
    inputs = [f"image-smoke-a-{run}", f"image-smoke-b-{run}"]
    base = (int(time.time()) - 60) * 1000  # whole seconds: 5 records in each 500 ms window
    events = [
        Event(inputs[i % 2], 0, base + 100 * i, b"k", json.dumps({"n": i}).encode(), 0) for i in range(20)
    ]

    async def prepare() -> None:
        await create_topics(bootstrap, [TopicSpec(t) for t in inputs])
        await produce(bootstrap, events)

    asyncio.run(prepare())
    return Flow(inputs, f"image-smoke-ordered-{run}", f"image-smoke-agg-{run}", len(events))


@pytest.fixture(scope="module")
def sidecar(bootstrap: str, flow: Flow, sidecar_venv: Path, root: Root) -> Iterator[dict[str, str]]:
    """The sidecar image's ENTRYPOINT + CMD with a pod's environment, until healthy."""
    image = Root(root.path / "sidecar-image")
    copy_from_context("sidecar", image, "/tmp")  # timesync.properties, healthcheck.py
    image("/tmp").mkdir(exist_ok=True)
    env = image_env(
        ("python-base", "sidecar"),
        image,
        {
            **service_link_env(shipped_services()),
            "TIMESYNC_HTTP_PORT": str(free_port()),
            # The image binds 0.0.0.0: without a token the sidecar refuses to start (as the
            # manifests do, the pod gets one from a Secret).
            "TIMESYNC_HTTP_AUTH_TOKEN": os.urandom(16).hex(),
            "TIMESYNC_BOOTSTRAP_SERVERS": bootstrap,
            "TIMESYNC_INPUT_TOPICS": ",".join(flow.inputs),
            "TIMESYNC_OUTPUT_TOPIC": flow.ordered,
        },
    )
    log = (root.path / "sidecar.log").open("w")
    proc = subprocess.Popen(
        image_command("sidecar", image), env=env, cwd=image("/tmp"), stdout=log, stderr=subprocess.STDOUT
    )
    # HEALTHCHECK CMD ["python", "/opt/timesync/healthcheck.py"]
    (healthcheck,) = instruction(stages()["sidecar"], "HEALTHCHECK")
    probe = [image.remap(a, "") for a in json.loads(healthcheck.split("CMD", 1)[1])]
    probe[0] = str(image("/opt/venv/bin") / probe[0])
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, f"the sidecar exited {proc.returncode}:\n{read(root, 'sidecar.log')}"
            check = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=10)
            if check.returncode == 0:
                break
            assert time.monotonic() < deadline, (
                f"not healthy after 90 s: {check.stdout}\n{read(root, 'sidecar.log')}"
            )
            time.sleep(0.5)
        yield {"healthz": check.stdout.strip()}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def data_records(bootstrap: str, topic: str, count: int, timeout_s: float = 60) -> list[dict[str, int]]:
    """The JSON values of the first ``count`` data records of ``topic`` (heartbeats skipped)."""
    deadline = time.monotonic() + timeout_s
    while True:
        # The sidecar's heartbeats come every second: stop at the end after a shorter quiet spell.
        records = asyncio.run(read_topics(bootstrap, [topic], idle_s=0.5, timeout_s=30))
        values = [json.loads(r.value) for r in records if r.value]
        if len(values) >= count or time.monotonic() > deadline:
            return values
        time.sleep(1)


def read(root: Root, name: str) -> str:
    return (root.path / name).read_text()[-3000:]


@pytest.mark.broker
def test_the_sidecar_image_with_a_pods_environment_gets_healthy_and_merges(
    bootstrap: str, flow: Flow, sidecar: dict[str, str]
) -> None:
    assert sidecar["healthz"].startswith("200")
    values = data_records(bootstrap, flow.ordered, flow.records)
    assert [v["n"] for v in values] == list(range(flow.records))


@pytest.mark.broker
@pytest.mark.spark
def test_the_spark_image_runs_a_job_to_completion(
    bootstrap: str, flow: Flow, sidecar: dict[str, str], spark_root: Root
) -> None:
    assert len(data_records(bootstrap, flow.ordered, flow.records)) == flow.records
    # The suite's JVM options for Spark (tests/conftest.py), as `docker run -e` would pass them.
    jvm = {"SPARK_SUBMIT_OPTS": os.environ["SPARK_SUBMIT_OPTS"]} if "SPARK_SUBMIT_OPTS" in os.environ else {}
    env = image_env(("python-base", "spark"), spark_root, {**service_link_env(shipped_services()), **jvm})
    args = [
        "aggregate", "--bootstrap-servers", bootstrap, "--topic", flow.ordered,
        "--output-topic", flow.aggregated, "--checkpoint", str(spark_root("/tmp") / "checkpoint"),
        "--trigger", "available-now", "--watermark-delay", "1ms",
        "--value-schema", "n BIGINT", "--size", "500ms", "--agg", "count", "--shuffle-partitions", "1",
    ]  # fmt: skip
    job = subprocess.run(
        ["bash", *image_command("spark", spark_root, args)],
        env=env,
        cwd=spark_root("/tmp"),
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert job.returncode == 0, job.stderr[-3000:]
    assert "timesync-spark: aggregate stopped; rows dropped as late: 0" in job.stderr
    # Each 500 ms window closes with its 5 records (the ordered input has no stragglers).
    rows = data_records(bootstrap, flow.aggregated, 1, timeout_s=30)
    assert rows
    assert all(row["count"] == 5 for row in rows)


def test_the_dockerfile_is_what_this_test_follows() -> None:
    """If the Dockerfile's steps change, this test must change with them."""
    text = DOCKERFILE.read_text()
    for step in (
        "python -m build --sdist --outdir /dist .",
        "pip wheel --no-cache-dir --no-deps --wheel-dir /dist /dist/timesync-*.tar.gz",
        'pip install --no-cache-dir "$(ls /dist/timesync-*.whl)[spark]"',
        'cp /tmp/spark-kafka-jars/*.jar "$spark_home/jars/"',
        'ln -s "$spark_home" /opt/spark',
    ):
        assert step in text
    assert (DEPLOY / "docker" / "spark-entrypoint.sh").exists()
