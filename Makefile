# timesync — the two commands a newcomer needs are `make demo` and `make test`.
# Both bootstrap everything themselves: a virtualenv in .venv, the Python packages, and the
# pinned Kafka / Spark-connector jars from Maven Central (cached in .cache/jars, ignored by git).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
MVN    ?= mvn
STAMP_PY   := $(VENV)/.installed
STAMP_JARS := .cache/jars/.fetched
POMS := deploy/local/pom.xml deploy/local/broker/pom.xml deploy/local/spark/pom.xml
PYTEST_ARGS ?=

export PIP_DISABLE_PIP_VERSION_CHECK := 1
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: all demo test lint format jars venv broker-start broker-stop clean bench

all: test

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP_PY): pyproject.toml | $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,spark,bench]'
	@touch $@

$(STAMP_JARS): $(POMS)
	@command -v $(MVN) >/dev/null || { echo "mvn not found: install Apache Maven (jars come from Maven Central)" >&2; exit 1; }
	$(MVN) -q -B -f deploy/local/pom.xml dependency:copy-dependencies
	@mkdir -p $(dir $@) && touch $@

venv: $(STAMP_PY)
jars: $(STAMP_JARS)

test: $(STAMP_PY) $(STAMP_JARS)
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(STAMP_PY)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy --strict sidecar/core

format: $(STAMP_PY)
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

demo: $(STAMP_PY) $(STAMP_JARS)
	$(PY) -m bench.demo

broker-start: $(STAMP_JARS)
	$(PYTHON) deploy/local/kafka.py start

broker-stop:
	$(PYTHON) deploy/local/kafka.py stop

clean:
	rm -rf $(VENV) .cache .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
