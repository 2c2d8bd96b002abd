"""The chart's values cover the sidecar's whole config, and its schema agrees (no helm needed)."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import jsonschema
import pytest
import yaml

from deploy.helm.values_schema import expected_text
from sidecar.config.surface import key_docs
from tests.deploy.conftest import CHART
from tests.deploy.contract import CONFIG_DEFAULTS, CONFIG_KEYS, PASSTHROUGH_PREFIXES, SECRET_KEYS


@functools.cache
def _values_text() -> str:
    return (CHART / "values.yaml").read_text()


def values() -> dict[str, Any]:
    return yaml.safe_load(_values_text())


def schema() -> dict[str, Any]:
    return json.loads((CHART / "values.schema.json").read_text())


@functools.cache
def config_validator() -> jsonschema.Draft7Validator:
    """The chart schema's validator of ``.Values.config``."""
    return jsonschema.Draft7Validator(schema()["properties"]["config"])


def test_values_list_every_config_key_and_nothing_else() -> None:
    config = values()["config"]
    assert sorted(CONFIG_KEYS - set(config)) == [], "keys missing from values.yaml"
    assert sorted(set(config) - CONFIG_KEYS) == [], "keys the sidecar does not know"


@pytest.mark.parametrize("prefix", PASSTHROUGH_PREFIXES)
def test_values_document_the_passthrough_client_keys(prefix: str) -> None:
    assert f"#   {prefix}" in (CHART / "values.yaml").read_text()


def test_values_carry_the_sidecar_defaults() -> None:
    config = values()["config"]
    for key, default in CONFIG_DEFAULTS.items():
        if default and key != "security.protocol":
            value = config[key]
            assert (str(value).lower() if isinstance(value, bool) else str(value)) == default, key


def test_values_cover_image_resources_probes_and_service_monitor() -> None:
    v = values()
    assert {"repository", "tag", "digest", "pullPolicy"} <= set(v["image"])
    assert {"requests", "limits"} <= set(v["resources"])
    assert set(v["probes"]) == {"startup", "liveness", "readiness"}
    assert v["serviceMonitor"]["enabled"] is False
    assert v["config"]["http.host"] == "0.0.0.0"


def test_schema_knows_every_key_and_accepts_the_defaults() -> None:
    s = schema()
    jsonschema.Draft7Validator.check_schema(s)
    assert set(s["properties"]["config"]["properties"]) == {d.key for d in key_docs() if not d.secret}
    assert set(s["properties"]["config"]["properties"]) >= CONFIG_KEYS
    jsonschema.validate(values(), s)


def test_the_committed_schema_is_generated_from_the_config_model() -> None:
    assert (CHART / "values.schema.json").read_text() == expected_text(), (
        "stale: run python -m deploy.helm.values_schema"
    )


@functools.cache
def _default_config() -> dict[str, Any]:
    config: dict[str, Any] = values()["config"]
    return config


def config_accepts(key: str, value: object) -> bool:
    """Whether the chart takes values.yaml's config with ``key`` set to ``value``."""
    return config_validator().is_valid({**_default_config(), key: value})


def test_the_chart_accepts_every_value_of_every_literal_and_nothing_near_it() -> None:
    for doc in key_docs():
        if doc.secret or "enum" not in doc.schema:
            continue
        for value in doc.schema["enum"]:
            assert config_accepts(doc.key, value), (doc.key, value)
            assert not config_accepts(doc.key, value.swapcase()), (doc.key, value)
            assert not config_accepts(doc.key, value + "x"), (doc.key, value)


@pytest.mark.parametrize(
    "spec",
    ["record", "json:ts", "json:meta.ts:iso", "avro:meta.ts", "avro:event.at:us", "protobuf:meta.ts:s"],
)
def test_the_chart_accepts_every_extractor_form_the_sidecar_accepts(spec: str) -> None:
    from sidecar.config import load_config

    assert config_accepts("timestamp.extractor", spec)
    sets = [
        "bootstrap.servers=k:9092",
        "input.topics=a",
        "output.topic=o",
        "schema.registry.url=http://r:8081",
    ]
    load_config(None, [*sets, f"timestamp.extractor={spec}"], environ={})


def test_the_values_comments_list_what_the_sidecar_accepts() -> None:
    """A comment ``# a | b | c`` after a key in values.yaml names exactly what the key accepts."""
    accepts = {d.key: d.accepts for d in key_docs()}
    listed = {}
    for line in (CHART / "values.yaml").read_text().splitlines():
        match = re.fullmatch(r"  ([a-z0-9.]+): \S+ +# (\S+ \| .*)", line)
        if match:
            listed[match[1]] = tuple(re.split(r",| \(", match[2])[0].split(" | "))
    assert {"timestamp.extractor", "watermark.policy", "processing.guarantee"} <= set(listed)
    for key, alternatives in listed.items():
        assert alternatives == accepts[key], key


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("task.grouping", "partitions"),
        ("max.task.idle.ms", "forever"),
        ("timestamp.extractor", "json"),
        ("late.records", "topic:"),
        ("watermark.policy", "perfect"),
        ("timestamp.extractor", "xml:ts"),
        ("timestamp.extractor", "avro:meta..ts"),
        ("processing.guarantee", "exactly_once"),
        ("errors.deadletterqueue.max.ratio", 0),
        ("compression.gzip.level", 0),
        ("max.task.idle", 5),
        ("ssl", "x"),
        ("ssl.protocol", "TLSv1.3"),  # not a key of the sidecar, which would refuse it at start
        # secrets never go into the ConfigMap
        ("sasl.password", "x"),
        ("ssl.password", "x"),
        ("http.auth.token", "x"),
        ("sasl.jaas.config", "x"),
    ],
)
def test_schema_rejects_bad_values_and_unknown_keys(key: str, value: object) -> None:
    bad = values()
    bad["config"][key] = value
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema())


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max.task.idle.ms", "max"),
        ("max.task.idle.ms", -1),
        ("timestamp.extractor", "json:meta.ts:iso"),
        ("timestamp.extractor", "avro:meta.ts"),
        ("timestamp.extractor", "protobuf:event.at:us"),
        ("late.records", "topic:late"),
        ("sasl.mechanism", "SCRAM-SHA-512"),
        ("ssl.cafile", "/etc/timesync/tls/ca.crt"),
    ],
)
def test_schema_accepts_the_documented_forms(key: str, value: object) -> None:
    good = values()
    good["config"][key] = value
    jsonschema.validate(good, schema())


def test_the_contract_here_matches_the_sidecars_own_config_model() -> None:
    from sidecar.config import KEYS

    own = {k for k in KEYS if not k.startswith(PASSTHROUGH_PREFIXES) and k not in SECRET_KEYS}
    assert own == CONFIG_KEYS, "a key was added to or removed from sidecar/config/model.py: update the chart"
    defaults = {d.key: d.default or "" for d in key_docs()}
    # The image and the chart listen on every interface; security.protocol is left to the user.
    differ = {"http.host", "security.protocol"}
    assert {k: v for k, v in CONFIG_DEFAULTS.items() if k not in differ} == {
        k: defaults[k] for k in CONFIG_DEFAULTS if k not in differ
    }


def test_chart_pod_templates_turn_service_links_off() -> None:
    """Without helm: every template that holds a pod spec says ``enableServiceLinks: false``
    (a release named ``timesync`` would otherwise give its pods ``TIMESYNC_PORT``, read as config).
    The rendered chart is checked under ``make deploy-check`` (test_helm.py)."""
    templates = sorted((CHART / "templates").glob("*.yaml"))
    with_pods = [t for t in templates if re.search(r"^\s*containers:", t.read_text(), flags=re.M)]
    assert [t.name for t in with_pods] == ["deployment.yaml"]
    for template in with_pods:
        assert re.search(r"^      enableServiceLinks: false$", template.read_text(), flags=re.M), (
            template.name
        )
