"""The Schema Registry keys: named as Confluent's clients name them, secrets masked, coherent."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.config import ConfigError, SidecarConfig, load_config
from sidecar.config.registry_url import shown_url
from sidecar.registry.batches import registry_settings

REQUIRED = ["bootstrap.servers=127.0.0.1:9092", "input.topics=a,b", "output.topic=out"]
SECRET = "hunter2-s3cret"
URL = "http://127.0.0.1:8081/apis/ccompat/v7"


def load(*sets: str) -> SidecarConfig:
    return load_config(None, [*REQUIRED, *sets], {})


def error(*sets: str, path: Any = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(path, [*REQUIRED, *sets], {})
    assert len(str(caught.value).splitlines()) == 1
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
        (["schema.registry.url=localhost:8081"], "must be http:// or https:// followed by a host"),
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


# -- issue 32, item 5: where the registry's credentials may go -----------------------------------

USER, PASSWORD = "alice", "pw-7f3kq9"


def hides_credentials(text: str) -> bool:
    return USER not in text and PASSWORD not in text


@pytest.mark.parametrize(
    "source",
    ["set", "env", "file"],
)
def test_credentials_in_the_url_are_refused_without_repeating_them(source: str, tmp_path: Any) -> None:
    url = f"https://{USER}:{PASSWORD}@registry.example:8081/apis/ccompat/v7"
    sets = [*REQUIRED, "timestamp.extractor=avro:ts"]
    env: dict[str, str] = {}
    path = None
    if source == "set":
        sets.append(f"schema.registry.url={url}")
    elif source == "env":
        env["TIMESYNC_SCHEMA_REGISTRY_URL"] = url
    else:
        path = tmp_path / "c.properties"
        path.write_text(f"schema.registry.url={url}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, sets, env)
    message = str(caught.value)
    assert "holds a user name or password" in message
    assert "schema.registry.basic.auth.user.info" in message, "says where credentials go"
    assert "'https://***@registry.example:8081/apis/ccompat/v7'" in message
    assert hides_credentials(message)
    assert len(message.splitlines()) == 1


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"https://{USER}:{PASSWORD}@h:1/x", "https://***@h:1/x"),
        (f"https://{USER}@h/x", "https://***@h/x"),
        (f"{USER}:{PASSWORD}@h:8081", "***@h:8081"),  # no scheme: "alice" would parse as one
        (f"http://h/x?token={PASSWORD}#f", "http://h/x?***#***"),
        (f"http://[::1{PASSWORD}@x", "***@x"),  # does not parse at all
        ("http://h:8081/apis/ccompat/v7", "http://h:8081/apis/ccompat/v7"),
    ],
)
def test_a_url_is_shown_without_user_information_or_query(url: str, shown: str) -> None:
    assert shown_url(url) == shown


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            ["schema.registry.url=http://registry.example:8081", "schema.registry.ssl.cafile=/etc/ca.pem"],
            "schema.registry.ssl.cafile is set but schema.registry.url 'http://registry.example:8081' is "
            "http://, which would ignore it; use https:// or remove schema.registry.ssl.cafile",
        ),
        (
            [
                "schema.registry.url=http://registry.example:8081",
                f"schema.registry.basic.auth.user.info=u:{SECRET}",
            ],
            "schema.registry.basic.auth.user.info is set but schema.registry.url "
            "'http://registry.example:8081' is http:// to a host other than loopback: the credentials "
            "would cross the network in clear text; use https://",
        ),
        (
            ["schema.registry.url=http://10.0.0.7:8081", f"schema.registry.bearer.auth.token={SECRET}"],
            "schema.registry.bearer.auth.token is set but schema.registry.url 'http://10.0.0.7:8081' is "
            "http:// to a host other than loopback",
        ),
        (["schema.registry.url=http://h:8081/x?key=1"], "has a query or a fragment"),
        (["schema.registry.url=http://h:99999"], "is not a URL"),
        ([f"schema.registry.basic.auth.user.info={SECRET}"], "expected user:password"),
        (
            [f"schema.registry.bearer.auth.token={SECRET}"],
            "schema.registry.bearer.auth.token is set but schema.registry.url is empty",
        ),
    ],
)
def test_tls_and_credential_settings_that_do_not_fit_the_url_are_refused(
    sets: list[str], message: str
) -> None:
    shown = error(*sets)
    assert message in shown
    assert SECRET not in shown


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8081/apis/ccompat/v7",
        "http://localhost:8081",
        "http://[::1]:8081",
        "https://registry.example:8081",
    ],
)
def test_credentials_go_over_https_or_stay_on_loopback(url: str) -> None:
    config = load(f"schema.registry.url={url}", f"schema.registry.basic.auth.user.info=u:{SECRET}")
    assert config.redacted()["schema.registry.url"] == url
    assert load(f"schema.registry.url={url}").schema_registry_url == url, "and no credentials at all"


# -- issue 32, item 10: no config error repeats what could be a secret ---------------------------


def test_a_mistyped_registry_credential_in_set_is_never_echoed() -> None:
    """A space for '=' and a misspelt key (userinfo for user.info): the key is named, nothing after it."""
    assert error(f"schema.registry.basic.auth.userinfo {USER}:{PASSWORD}") == (
        "config error: --set expects key=value, got 'schema.registry.basic.auth.userinfo' "
        "followed by a hidden value"
    )


@pytest.mark.parametrize(
    "item",
    [
        f"{USER}:{PASSWORD}",  # the key forgotten
        PASSWORD,  # a lone value
        f"{PASSWORD} {USER}",
    ],
)
def test_a_set_item_that_starts_like_no_key_is_not_quoted_at_all(item: str) -> None:
    message = error(item)
    assert "not shown" in message
    assert hides_credentials(message)


@pytest.mark.parametrize(
    "text",
    [
        # A value continued on the next line, as Java allows and this reader does not: the
        # second line reads as key "alice", value the password.
        f"schema.registry.basic.auth.user.info=\\\n{USER}:{PASSWORD}\n",
        f"schema.registry.basic.auth.user.info=u:p\n{PASSWORD}\n",  # a lone word
    ],
)
def test_a_word_like_no_key_in_a_properties_file_is_not_quoted_but_its_line_is_named(
    text: str, tmp_path: Any
) -> None:
    path = tmp_path / "c.properties"
    path.write_text(text)
    message = error(path=path)
    assert f"(from {path}, line 2), not shown" in message
    assert hides_credentials(message)


def test_a_secret_looking_value_of_an_ordinary_key_is_not_quoted() -> None:
    message = error(f"linger.ms=password:{PASSWORD}")
    assert message == (
        "config error: linger.ms = (hidden: it may hold a secret) (from --set): Input should be a valid "
        "integer, unable to parse string as an integer"
    )


def test_the_command_line_split_by_the_shell_is_not_echoed(capsys: pytest.CaptureFixture[str]) -> None:
    """``--set schema.registry.basic.auth.userinfo alice:s3cret`` unquoted: argparse meets the
    credentials as an argument it does not know."""
    from sidecar import cli

    with pytest.raises(SystemExit) as caught:
        cli.main(["--set", "schema.registry.basic.auth.userinfo", f"{USER}:{PASSWORD}"])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert err == "timesync-sidecar: unrecognized arguments: 1 more word (not shown) (see --help)\n"
    with pytest.raises(SystemExit):
        cli.main(["--sett", f"schema.registry.basic.auth.user.info={USER}:{PASSWORD}"])
    err = capsys.readouterr().err
    assert "--sett" in err
    assert hides_credentials(err)
