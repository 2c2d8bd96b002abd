"""The Schema Registry keys: named as Confluent's clients name them, secrets masked, coherent."""

from __future__ import annotations

import pytest

from sidecar.config import ConfigError, SidecarConfig, load_config
from sidecar.registry.batches import registry_settings

REQUIRED = ["bootstrap.servers=127.0.0.1:9092", "input.topics=a,b", "output.topic=out"]
SECRET = "hunter2-s3cret"
URL = "http://127.0.0.1:8081/apis/ccompat/v7"


def load(*sets: str) -> SidecarConfig:
    return load_config(None, [*REQUIRED, *sets], {})


def error(*sets: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load(*sets)
    return str(caught.value)


def test_avro_and_protobuf_extractors_need_the_registry_url() -> None:
    assert error("timestamp.extractor=avro:meta.ts") == (
        "config error: timestamp.extractor=avro:... needs schema.registry.url (its schemas come from there)"
    )
    assert load("timestamp.extractor=protobuf:at", f"schema.registry.url={URL}").schema_registry_url == URL


def test_the_registry_credentials_are_secrets_masked_everywhere() -> None:
    config = load_config(
        None,
        [*REQUIRED, "timestamp.extractor=avro:ts", f"schema.registry.url={URL}"],
        {"TIMESYNC_SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO": f"svc:{SECRET}"},
    )
    shown = config.redacted()
    assert shown["schema.registry.basic.auth.user.info"] == "********"
    assert shown["schema.registry.bearer.auth.token"] == ""
    assert SECRET not in repr(shown) + repr(config)
    assert registry_settings(config).headers()["Authorization"].startswith("Basic ")
    assert SECRET not in error(f"schema.registry.bearer.auth.token={SECRET}", "schema.registry.url=ftp://x")


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["schema.registry.url=localhost:8081"], "must start with http:// or https://"),
        (
            [
                f"schema.registry.url={URL}",
                "schema.registry.basic.auth.user.info=a:b",
                "schema.registry.bearer.auth.token=t",
            ],
            "both set; give one",
        ),
    ],
)
def test_incoherent_registry_settings_fail_at_start(sets: list[str], message: str) -> None:
    assert message in error(*sets)
