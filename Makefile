# timesync — the two commands a newcomer needs are `make demo` and `make test`.
# Both bootstrap everything themselves: a virtualenv in .venv, the Python packages, and the
# pinned Kafka / Spark-connector jars from Maven Central (cached in .cache/jars, ignored by git).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
MVN    ?= mvn
STAMP_PY   := $(VENV)/.installed
STAMP_JARS := .cache/jars/.fetched
STAMP_PROM := .cache/tools/.prometheus
STAMP_REGISTRY := .cache/registry/.fetched
POMS := deploy/local/pom.xml deploy/local/broker/pom.xml deploy/local/spark/pom.xml
PYTEST_ARGS ?=
# Four workers on one broker and one registry (started once, for all of them), taking units of
# work in the order tests/conftest.py gives: the long ones first (the Spark session's tests, the
# three-node cluster's, the image, the quick bench run), the pure tests last, to fill in.
# PYTEST_WORKERS= runs the suite in one process.
PYTEST_WORKERS ?= -n 4 --dist loadgroup --no-loadscope-reorder

export PIP_DISABLE_PIP_VERSION_CHECK := 1
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: all bootstrap demo test test-chaos lint format jars venv broker-start broker-stop registry registry-start registry-stop clean bench deploy-check deploy-tools prometheus config-surface

all: test

$(PY):
	$(PYTHON) -m venv $(VENV)

# setup.py and the .pyx files: the editable install compiles the output encoder and the
# fetched-record reader in place, so a change to either must rebuild.
$(STAMP_PY): pyproject.toml setup.py $(wildcard sidecar/core/_kernel_*.pyx sidecar/core/_kernel_*.pxd) sidecar/output/_stamp_encoder.pyx sidecar/kafka/_fetched.pyx sidecar/kafka/_records.pyx sidecar/kafka/_records.pxd timesync_wire/_zigzag.pxd \
		timesync_wire/formats/_avro_plan.pyx timesync_wire/formats/_json_scan.pyx timesync_wire/formats/_json_tokens.pxd timesync_wire/formats/_protobuf_plan.pyx timesync_wire/formats/_wire_reads.pxd | $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,spark,bench]'
	@touch $@

$(STAMP_JARS): $(POMS)
	@command -v $(MVN) >/dev/null || { echo "mvn not found: install Apache Maven (jars come from Maven Central)" >&2; exit 1; }
	$(MVN) -q -B -f deploy/local/pom.xml dependency:copy-dependencies
	@mkdir -p $(dir $@) && touch $@

# timesync's suppress operator (a Spark StatefulProcessor in Java), built against the Spark
# version its pom pins (= pyspark's) and put beside the connector jars, where timesync-spark
# looks for it (spark_consumer/session.py).
OPERATOR_POM := operators/suppress/pom.xml
SPARK_VERSION := $(shell sed -n 's:.*<spark.version>\(.*\)</spark.version>.*:\1:p' $(OPERATOR_POM))
OPERATOR_JAR := .cache/jars/operator/timesync-suppress-operator-$(SPARK_VERSION).jar
$(OPERATOR_JAR): $(OPERATOR_POM) $(shell find operators/suppress/src -name '*.java') | $(STAMP_JARS) $(STAMP_REGISTRY)
	@command -v $(MVN) >/dev/null || { echo "mvn not found: install Apache Maven (the suppress operator is built with it)" >&2; exit 1; }
	$(MVN) -q -B -f $(OPERATOR_POM) package
	@mkdir -p $(dir $@) && cp operators/suppress/target/$(notdir $@) $@

# timesync's interval join (`join`'s StatefulProcessor), built and shipped the same way; its pom
# pins the same Spark (tests/unit/test_session_operator.py holds the two poms equal).
JOIN_OPERATOR_POM := operators/join/pom.xml
JOIN_OPERATOR_JAR := .cache/jars/operator/timesync-join-operator-$(SPARK_VERSION).jar
$(JOIN_OPERATOR_JAR): $(JOIN_OPERATOR_POM) $(shell find operators/join/src -name '*.java') | $(STAMP_JARS) $(STAMP_REGISTRY) $(OPERATOR_JAR)
	@command -v $(MVN) >/dev/null || { echo "mvn not found: install Apache Maven (the join operator is built with it)" >&2; exit 1; }
	$(MVN) -q -B -f $(JOIN_OPERATOR_POM) package
	@mkdir -p $(dir $@) && cp operators/join/target/$(notdir $@) $@

OPERATOR_JARS := $(OPERATOR_JAR) $(JOIN_OPERATOR_JAR)

# The benchmark's JVM peers: the Kafka Streams peer's jar and Kafka's perf tools. The harness
# builds them on first use (bench/peers/kafka_streams.py, bench/ceiling.py); preparing them here
# takes that minute out of the quick bench run in the suite, beside the Python install.
KS_PEER_JAR := bench/peers/kafka-streams/target/timesync-kafka-streams-peer.jar
$(KS_PEER_JAR): bench/peers/kafka-streams/pom.xml $(shell find bench/peers/kafka-streams/src -name '*.java') | $(STAMP_JARS) $(STAMP_REGISTRY) $(OPERATOR_JARS)
	$(MVN) -q -B -f bench/peers/kafka-streams/pom.xml package
	@touch $@
KAFKA_TOOLS := bench/peers/kafka-tools/target/lib/.fetched
$(KAFKA_TOOLS): bench/peers/kafka-tools/pom.xml | $(STAMP_JARS) $(STAMP_REGISTRY) $(OPERATOR_JARS) $(KS_PEER_JAR)
	$(MVN) -q -B -f bench/peers/kafka-tools/pom.xml dependency:copy-dependencies
	@mkdir -p $(dir $@) && touch $@
PEERS := $(KS_PEER_JAR) $(KAFKA_TOOLS)

venv: $(STAMP_PY)
jars: $(STAMP_JARS) $(OPERATOR_JARS)
# Every target that may run `suppress` or `join` builds their operators first.
test-chaos demo bench: $(OPERATOR_JARS)  # test: through bootstrap

# Apicurio Registry (Schema Registry with Confluent's API) for the avro:/protobuf: tests: its
# tar.gz (~158 MB) is fetched once with mvn into .cache/registry and unpacked there.
$(STAMP_REGISTRY): deploy/local/registry.py | $(STAMP_JARS)
	$(PYTHON) deploy/local/registry.py fetch
	@touch $@

registry: $(STAMP_REGISTRY)

# Prometheus and promtool (Debian's `prometheus` package, 2.42): the alert rules' checks and the
# test that scrapes a running sidecar and runs the dashboard's queries. Installed with apt-get
# when missing and we are root; where that cannot be done the recipe says so and succeeds, and
# those tests skip naming the reason. The stamp is written only once both are there.
$(STAMP_PROM):
	@if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus; \
	  else \
	    echo "prometheus/promtool missing and not installable here (needs apt-get as root): their tests will skip" >&2; \
	  fi; \
	fi
	@if command -v prometheus >/dev/null && command -v promtool >/dev/null; then mkdir -p $(dir $@) && touch $@; fi

prometheus: $(STAMP_PROM)

# Lint first: CI holds the style and the types as it holds the tests. What the suite needs is
# prepared side by side (`bootstrap`): the Python packages (then lint), the Maven artifacts and
# Prometheus wait on the network and the disk more than on each other. The Maven steps stay one
# after the other (order-only prerequisites below): they share ~/.m2.
test: bootstrap
	$(PY) -m pytest -m "not deploy_tools" $(PYTEST_WORKERS) $(PYTEST_ARGS)

bootstrap:
	@$(MAKE) --no-print-directory -j4 lint $(STAMP_JARS) $(OPERATOR_JARS) $(PEERS) $(STAMP_PROM) $(STAMP_REGISTRY)

# The fault tests (tests/faults) at the size of the reliability issue: 200,000 records, 12 kill -9
# restarts, a 50 s broker outage, and on a local three-broker cluster rolling restarts, leader and
# coordinator kills and random outages (~20 min). `make test` runs them small. Prints each run's figures.
test-chaos: $(STAMP_PY) $(STAMP_JARS)
	FAULTS_SIZE=full $(PY) -m pytest tests/faults -rP $(PYTEST_ARGS)

lint: $(STAMP_PY)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy --strict sidecar spark_consumer testkit timesync_wire

format: $(STAMP_PY)
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

# What is generated from the sidecar's config model (sidecar/config/surface.py): the key table of
# docs/sidecar.md and the `config` part of the Helm chart's values schema. Tests fail while either
# is stale (tests/unit/test_docs.py, tests/deploy/test_helm_values.py).
config-surface: $(STAMP_PY)
	$(PY) -m sidecar config --format markdown --update docs/sidecar.md
	$(PY) -m deploy.helm.values_schema

# DEMO_FORMAT=avro: the same pipeline on Avro values through the local Schema Registry.
DEMO_FORMAT ?= json
demo: $(STAMP_PY) $(STAMP_JARS) $(if $(filter avro,$(DEMO_FORMAT)),$(STAMP_REGISTRY))
	DEMO_FORMAT=$(DEMO_FORMAT) $(PY) -m bench.demo

# The benchmark (bench/README.md): every system and setting on every workload, about 40 minutes on 2 cores (37 min on 2026-11-25).
# BENCH_ARGS=--quick for the < 3 min version; results, report and plots go to results/. A full run
# then rewrites the generated figure blocks of the READMEs (python -m bench readme; a quick run's
# results are refused there).
BENCH_ARGS ?=
bench: $(STAMP_PY) $(STAMP_JARS) $(PEERS)
	$(PY) -m bench run $(BENCH_ARGS)
	$(PY) -m bench readme --results results/results.json

broker-start: $(STAMP_JARS)
	$(PYTHON) deploy/local/kafka.py start

broker-stop:
	$(PYTHON) deploy/local/kafka.py stop

registry-start: $(STAMP_REGISTRY)
	$(PYTHON) deploy/local/registry.py start

registry-stop:
	$(PYTHON) deploy/local/registry.py stop

clean:
	rm -rf $(VENV) .cache .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info

# --- deploy/ checks that need tools too slow to install on every CI run ----------------------
# Helm is built from its Go module (~25 s with a warm Go cache, ~4-5 min cold) and checkov gets
# its own venv (~2.5 min; its pins clash with ours). Both are cached in .cache/tools/. `make test`
# runs the other deploy checks (hadolint, shellcheck, Kubernetes and Compose schemas, Grafana).
TOOLS           := .cache/tools
HELM_VERSION    := v3.22.0
HELM_K8S_MINOR  := 37
HELM            := $(TOOLS)/helm-$(HELM_VERSION)/helm
CHECKOV_VERSION := 3.3.30
CHECKOV         := $(TOOLS)/checkov-$(CHECKOV_VERSION)/bin/checkov
HELM_PKG        := helm.sh/helm/v3
# The version and default Kubernetes version that Helm's own release build stamps in.
HELM_LDFLAGS    := -s -w -X $(HELM_PKG)/internal/version.version=$(HELM_VERSION) \
	-X $(HELM_PKG)/pkg/chartutil.k8sVersionMajor=1 -X $(HELM_PKG)/pkg/chartutil.k8sVersionMinor=$(HELM_K8S_MINOR) \
	-X $(HELM_PKG)/pkg/lint/rules.k8sVersionMajor=1 -X $(HELM_PKG)/pkg/lint/rules.k8sVersionMinor=$(HELM_K8S_MINOR)

$(HELM):
	@command -v go >/dev/null || { echo "go not found: helm is built from its Go module; install Go >= 1.25" >&2; exit 1; }
	GOBIN=$(abspath $(dir $@)) GOFLAGS=-buildvcs=false go install -ldflags '$(HELM_LDFLAGS)' $(HELM_PKG)/cmd/helm@$(HELM_VERSION)

$(CHECKOV):
	rm -rf $(TOOLS)/checkov-$(CHECKOV_VERSION)
	$(PYTHON) -m venv $(TOOLS)/checkov-$(CHECKOV_VERSION)
	$(TOOLS)/checkov-$(CHECKOV_VERSION)/bin/pip install -q checkov==$(CHECKOV_VERSION)

deploy-tools: $(HELM) $(CHECKOV)

deploy-check: $(STAMP_PY) $(HELM) $(CHECKOV)
	HELM_BIN=$(abspath $(HELM)) CHECKOV_BIN=$(abspath $(CHECKOV)) \
	  $(PY) -m pytest tests/deploy $(PYTEST_ARGS)
