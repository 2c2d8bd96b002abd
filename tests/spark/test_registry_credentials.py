"""The Spark job's registry client keeps its credentials (issue 32, item 6): never sent to
another host on a redirect, never taken from the command line (``ps`` and pod specs show it),
never repeated in an error; and the registry's answers, bytes we do not control, become one-line
errors, never a crash. No Spark session is started."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_consumer.cli import main
from spark_consumer.options import UsageError
from spark_consumer.schema_registry import (
    MAX_ANSWER_BYTES,
    RegistryClient,
    RegistryError,
    RegistrySettings,
    SchemaVersion,
    _schema_version,
)
from tests.spark.fake_registry import fake_registry, versions

V1 = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]})
COMMON = ["--bootstrap-servers", "127.0.0.1:1", "--topic", "t", "--checkpoint", "/tmp/unused"]
AGGREGATE = ["aggregate", *COMMON, "--sink", "console", "--size", "5s", "--key-field", "a"]
USER_INFO = "alice:s3cr3t-pw"


def test_a_redirect_is_not_followed_and_the_credentials_never_reach_the_other_host() -> None:
    with fake_registry(versions("s", (1, "AVRO", V1))) as (other, seen_there):
        moved = {"/subjects/s/versions": (302, {}, {"Location": f"{other}/subjects/s/versions?k=v"})}
        with fake_registry(moved) as (url, _), pytest.raises(RegistryError) as caught:
            RegistryClient(RegistrySettings(url, basic_auth_user_info=USER_INFO)).versions("s")
    assert seen_there == [], "nothing, and so no Authorization, went to the other host"
    message = str(caught.value)
    assert f"redirected to {other}/subjects/s/versions?*** (302)" in message
    assert "redirects are not followed" in message
    assert USER_INFO not in message


@pytest.mark.parametrize(
    "option", ["--schema-registry-basic-auth-user-info", "--schema-registry-bearer-auth-token"]
)
def test_credentials_on_the_command_line_are_refused_without_repeating_them(
    option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main([*AGGREGATE, "--value-format", "avro", "--schema-registry-url", "https://r", option, USER_INFO])
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{option}: credentials on the command line are visible to ps" in err
    assert f"{option}-file FILE" in err
    assert "s3cr3t" not in err


def test_credentials_come_from_a_file_without_its_final_line_break(tmp_path: Path) -> None:
    secret = tmp_path / "user-info"
    secret.write_text(f"{USER_INFO}\n")
    routes = versions("t-value", (1, "AVRO", V1))
    with fake_registry(routes) as (url, seen):
        argv = [*AGGREGATE, "--value-format", "avro", "--schema-registry-url", url]
        argv += ["--schema-registry-basic-auth-user-info-file", str(secret)]
        from spark_consumer.cli import build_parser
        from spark_consumer.common_options import registry_values

        registry_values(build_parser().parse_args(argv))
    assert seen[0]["Authorization"] == "Basic " + base64.b64encode(USER_INFO.encode()).decode()


def test_a_file_and_a_variable_for_one_credential_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "token"
    secret.write_text("tok-123")
    monkeypatch.setenv("TIMESYNC_SPARK_SCHEMA_REGISTRY_BEARER_AUTH_TOKEN", "tok-456")
    argv = [*AGGREGATE, "--value-format", "avro", "--schema-registry-url", "https://r"]
    assert main([*argv, "--schema-registry-bearer-auth-token-file", str(secret)]) == 2
    err = capsys.readouterr().err
    both = "--schema-registry-bearer-auth-token-file and $TIMESYNC_SPARK_SCHEMA_REGISTRY_BEARER_AUTH_TOKEN"
    assert f"{both} are both set" in err
    assert "tok-" not in err


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        # An abbreviation argparse cannot resolve: it would quote the whole --option=value.
        (["--schema-registry-basic-auth-user=" + USER_INFO], "--schema-registry-basic-auth-user=..."),
        ([USER_INFO], "unrecognized arguments: 1 more word (not shown)"),
        (["--sink", USER_INFO], "argument --sink: invalid choice (choose from"),
    ],
)
def test_argparse_errors_quote_no_value(
    argv: list[str], shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*AGGREGATE, *argv]) == 2
    err = capsys.readouterr().err
    assert shown in err
    assert "s3cr3t" not in err


@pytest.mark.parametrize(
    ("url", "extra", "message"),
    [
        (f"https://{USER_INFO}@r:8081", {}, "holds a user name or password"),
        (
            "http://reg.example:8081",
            {"basic_auth_user_info": USER_INFO},
            "http:// to a host other than loopback",
        ),
        ("http://reg.example:8081", {"ssl_cafile": "/ca.pem"}, "--schema-registry-ssl-cafile is set but"),
        ("https://r/x?token=abc", {}, "has a query or a fragment"),
    ],
)
def test_the_registry_url_follows_the_sidecars_rules(url: str, extra: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        RegistrySettings(url, **extra)
    assert "s3cr3t" not in str(caught.value)
    assert "abc" not in str(caught.value)


def test_loopback_may_take_credentials_over_http() -> None:
    assert (
        RegistrySettings("http://127.0.0.1:8081", basic_auth_user_info=USER_INFO).url
        == "http://127.0.0.1:8081"
    )


def test_an_answer_larger_than_the_bound_is_refused_not_buffered() -> None:
    routes = {"/subjects/s/versions": (200, "x" * (MAX_ANSWER_BYTES + 1))}
    with fake_registry(routes) as (url, _), pytest.raises(RegistryError, match="answered more than"):
        RegistryClient(RegistrySettings(url)).versions("s")


def test_json_nested_without_end_is_one_line_not_a_crash() -> None:
    routes = {"/subjects/s/versions": (200, b"[" * 100_000 + b"]" * 100_000)}
    with fake_registry(routes) as (url, _), pytest.raises(RegistryError, match="something that is not JSON"):
        RegistryClient(RegistrySettings(url)).versions("s")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=15,
)
versions_like = st.fixed_dictionaries(
    {},
    optional={
        "version": json_values,
        "id": json_values,
        "schema": json_values,
        "schemaType": st.sampled_from(["AVRO", "PROTOBUF", "JSON", "XML"]) | json_values,
        "references": st.lists(
            st.fixed_dictionaries(
                {}, optional={"name": json_values, "subject": json_values, "version": json_values}
            ),
            max_size=3,
        )
        | json_values,
    },
)


@settings(max_examples=200, deadline=1000)
@given(found=versions_like | json_values)
def test_any_decoded_answer_is_a_version_or_one_line_registry_error(found: Any) -> None:
    try:
        version = _schema_version(found, "s")
    except RegistryError as e:
        message = str(e)
    else:
        assert isinstance(version, SchemaVersion)
        assert type(version.id) is int
        assert isinstance(version.schema, str)
        return
    assert len(message.splitlines()) == 1
