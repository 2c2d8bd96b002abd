"""The config loader: every source, precedence, and an error a user can act on for every mistake.

Sources, later wins: a ``.properties`` or YAML file, ``TIMESYNC_*`` environment variables, then
``--set key=value``. Every mistake is a :class:`ConfigError` whose one line names the key, the
value, where it came from and what is allowed; secrets never appear in it, nor in ``redacted()``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from sidecar import cli
from sidecar.config import ConfigError, SidecarConfig, load_config
from sidecar.core import IDLE_AUTO

REQUIRED = ["bootstrap.servers=127.0.0.1:9092", "input.topics=a,b", "output.topic=out"]
SECRET = "hunter2-s3cret"


def load(*sets: str, path: Path | None = None, env: Mapping[str, str] | None = None) -> SidecarConfig:
    return load_config(path, list(sets), env or {})


def error(*sets: str, path: Path | None = None, env: Mapping[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load(*sets, path=path, env=env)
    message = str(caught.value)
    assert "\n" not in message, "one line"
    assert message.startswith("config error: ")
    return message


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- sources ------------------------------------------------------------------------------------


def test_set_alone_gives_the_required_keys_and_defaults_for_the_rest() -> None:
    config = load(*REQUIRED)

    assert (config.bootstrap_servers, config.topics, config.output_topic) == (
        "127.0.0.1:9092",
        ["a", "b"],
        "out",
    )
    assert config.effective_group_id == "timesync-out"
    assert config.max_task_idle_ms == 0
    assert config.errors_tolerance == "none"
    assert config.http_host == "127.0.0.1"


def test_properties_file_takes_equals_colon_and_whitespace_separators_and_comments(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "timesync.properties",
        "# a comment\n"
        "! another comment\n"
        "\n"
        "bootstrap.servers = 127.0.0.1:9092\n"
        "input.topics: a, b\n"
        "output.topic out\n"
        "  max.task.idle.ms=250  \n"
        "group.id=g=1\n",
    )
    config = load(path=path)

    assert config.bootstrap_servers == "127.0.0.1:9092", "only the first separator splits"
    assert config.topics == ["a", "b"], "entries are trimmed"
    assert config.output_topic == "out"
    assert config.max_task_idle_ms == 250
    assert config.group_id == "g=1"


def test_yaml_file_nests_keys_and_takes_lists_and_booleans(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "timesync.yaml",
        """
bootstrap.servers: 127.0.0.1:9092
input:
  topics: [a, b]
output:
  topic: out
max.task.idle.ms: max
security.protocol: SSL
ssl:
  cafile: /etc/ca.pem
  check:
    hostname: false
watermark:
  heartbeat:
    ms: 0
""",
    )
    config = load(path=path)

    assert config.topics == ["a", "b"]
    assert config.output_topic == "out"
    assert config.max_task_idle_ms == 2**63 - 1
    assert config.ssl_cafile == "/etc/ca.pem"
    assert config.ssl_check_hostname is False
    assert config.watermark_heartbeat_ms == 0


def test_an_empty_yaml_file_sets_nothing(tmp_path: Path) -> None:
    assert load(*REQUIRED, path=write(tmp_path, "empty.yml", "")).output_topic == "out"


def test_environment_variables_are_the_key_in_upper_snake_case() -> None:
    env = {
        "TIMESYNC_BOOTSTRAP_SERVERS": "127.0.0.1:1",
        "TIMESYNC_INPUT_TOPICS": "x",
        "TIMESYNC_OUTPUT_TOPIC": "y",
        "TIMESYNC_MAX_TASK_IDLE_MS": "-1",
        "TIMESYNC_ERRORS_DEADLETTERQUEUE_TOPIC_NAME": "dlq",
        "PATH": "/usr/bin",  # other variables are none of our business
    }
    config = load(env=env)

    assert (config.bootstrap_servers, config.topics, config.output_topic) == ("127.0.0.1:1", ["x"], "y")
    assert config.max_task_idle_ms == -1
    assert config.errors_deadletterqueue_topic_name == "dlq"


def test_spark_job_variables_are_left_alone() -> None:
    env = {"TIMESYNC_SPARK_JARS_DIR": "/jars", "TIMESYNC_SPARK_PACKAGES": "auto"}
    assert load(*REQUIRED, env=env).output_topic == "out"


# -- precedence ---------------------------------------------------------------------------------


def test_later_sources_win_file_then_env_then_set(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "c.properties",
        "bootstrap.servers=file:1\ninput.topics=a\noutput.topic=from-file\n"
        "max.task.idle.ms=1\nlinger.ms=1\nwatermark.max.delay.ms=1\n",
    )
    env = {"TIMESYNC_MAX_TASK_IDLE_MS": "2", "TIMESYNC_LINGER_MS": "2"}

    config = load("max.task.idle.ms=3", path=path, env=env)

    assert config.watermark_max_delay_ms == 1, "file only"
    assert config.linger_ms == 2, "env over file"
    assert config.max_task_idle_ms == 3, "--set over env and file"
    assert config.output_topic == "from-file"


def test_the_last_of_repeated_set_wins() -> None:
    assert load(*REQUIRED, "linger.ms=1", "linger.ms=7").linger_ms == 7


# -- max.task.idle.ms ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "idle"),
    [("-1", -1), ("0", 0), ("250", 250), ("max", 2**63 - 1), ("MAX", 2**63 - 1), (str(2**64), 2**63 - 1)],
)
def test_idle_takes_minus_one_zero_milliseconds_or_max(value: str, idle: int) -> None:
    assert load(*REQUIRED, f"max.task.idle.ms={value}").max_task_idle_ms == idle


@pytest.mark.parametrize("value", ["-2", "soon", "1.5", ""])
def test_idle_rejects_anything_else_saying_what_is_allowed(value: str) -> None:
    assert error(*REQUIRED, f"max.task.idle.ms={value}") == (
        f"config error: max.task.idle.ms = {value!r} (from --set): expected -1, 0, a number of "
        "milliseconds, max, or auto"
    )


@pytest.mark.parametrize("value", ["auto", "AUTO", " auto "])
def test_idle_auto_is_learnt_within_a_budget_of_one_second_by_default(value: str) -> None:
    config = load(*REQUIRED, f"max.task.idle.ms={value}")

    assert config.max_task_idle_ms == IDLE_AUTO
    assert config.task_config().max_task_idle_budget_ms == 1000
    assert config.redacted()["max.task.idle.ms"] == "auto"


def test_the_idle_budget_reaches_the_core() -> None:
    config = load(*REQUIRED, "max.task.idle.ms=auto", "max.task.idle.budget.ms=250")

    assert config.task_config().max_task_idle_budget_ms == 250


@pytest.mark.parametrize("value", ["0", "-5", "1.5", "max", "auto", ""])
def test_the_idle_budget_must_be_a_positive_number_of_milliseconds(value: str) -> None:
    assert error(*REQUIRED, f"max.task.idle.budget.ms={value}") == (
        f"config error: max.task.idle.budget.ms = {value!r} (from --set): expected a positive number "
        "of milliseconds: the most auto waits for a partition"
    )


# -- unknown keys -------------------------------------------------------------------------------


def test_an_unknown_key_in_set_names_the_closest_known_key() -> None:
    assert error(*REQUIRED, "max.task.idle=5") == (
        "config error: unknown key 'max.task.idle' (from --set); did you mean max.task.idle.ms?"
    )


def test_an_unknown_key_in_a_file_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "c.properties", "bootstrap.server=x\n")
    assert error(path=path) == (
        f"config error: unknown key 'bootstrap.server' (from {path}, line 1); did you mean bootstrap.servers?"
    )


def test_an_unknown_yaml_section_stops_at_the_section(tmp_path: Path) -> None:
    path = write(tmp_path, "c.yaml", "kafka:\n  bootstrap: x\n")
    assert error(path=path) == f"config error: unknown key 'kafka' (from {path})"


def test_an_unknown_environment_variable_is_an_error_with_a_hint() -> None:
    assert error(*REQUIRED, env={"TIMESYNC_MAX_TASK_IDLE": "5"}) == (
        "config error: unknown environment variable 'TIMESYNC_MAX_TASK_IDLE' (no such key); "
        "did you mean TIMESYNC_MAX_TASK_IDLE_MS?"
    )


def test_a_key_with_no_close_match_gets_no_hint() -> None:
    assert error(*REQUIRED, "zz.zz=1") == "config error: unknown key 'zz.zz' (from --set)"
    # A single word like no key is not quoted: it may be a value in a key's place (issue 32).
    assert error(*REQUIRED, "zzzz=1") == (
        "config error: unknown key (from --set), not shown: a single word like no key of the sidecar "
        "may be a misplaced value; `timesync-sidecar config` lists the keys"
    )


# -- bad values ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "source", "expected"),
    [
        ("auto.offset.reset=newest", "--set", "auto.offset.reset = 'newest' (from --set): Input should be"),
        ("task.grouping=pairs", "--set", "task.grouping = 'pairs' (from --set): Input should be 'single'"),
        ("buffered.records.per.partition=0", "--set", "greater than or equal to 1"),
        ("http.port=70000", "--set", "http.port = '70000' (from --set): Input should be less than"),
        ("timestamp.extractor=json:", "--set", "expected 'record', 'json:<dotted.path>[:ms|s|iso]'"),
        ("timestamp.extractor=json:ts:hours", "--set", "unknown unit 'hours'"),
        ("late.records=topic:", "--set", "expected forward, drop or topic:<name>"),
        ("errors.deadletterqueue.max.ratio=0", "--set", "greater than 0"),
        ("ssl.check.hostname=maybe", "--set", "ssl.check.hostname = 'maybe' (from --set): Input should be"),
        ("security.protocol=TLS", "--set", "'PLAINTEXT', 'SSL', 'SASL_PLAINTEXT' or 'SASL_SSL'"),
        ("input.topics=a,,b", "--set", "no empty entries"),
        ("input.topics=a,a", "--set", "a topic is listed twice"),
    ],
)
def test_a_bad_value_names_key_value_source_and_what_is_allowed(
    setting: str, source: str, expected: str
) -> None:
    message = error(*REQUIRED, setting)
    assert expected in message
    assert message.startswith(f"config error: {setting.partition('=')[0]} = ")


def test_a_bad_value_from_the_environment_names_the_variable() -> None:
    assert error(*REQUIRED, env={"TIMESYNC_LINGER_MS": "-5"}) == (
        "config error: linger.ms = '-5' (from env TIMESYNC_LINGER_MS): Input should be greater than or "
        "equal to 0"
    )


def test_a_bad_value_from_a_file_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "c.yaml", "http:\n  port: http\n")
    assert error(*REQUIRED, path=path).startswith(f"config error: http.port = 'http' (from {path}): ")


def test_rules_spanning_keys_say_what_is_missing() -> None:
    assert error(*REQUIRED, "output.topic=a") == "config error: output.topic 'a' is also an input topic"
    assert error(*REQUIRED, "errors.tolerance=all") == (
        "config error: errors.tolerance=all needs errors.deadletterqueue.topic.name: failing records must "
        "go somewhere"
    )
    assert error(*REQUIRED, "security.protocol=SASL_SSL") == (
        "config error: security.protocol=SASL_SSL needs sasl.username and sasl.password"
    )


# -- required keys ------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["bootstrap.servers", "input.topics", "output.topic"])
def test_each_required_key_is_required_and_the_message_says_how_to_set_it(key: str) -> None:
    others = [s for s in REQUIRED if not s.startswith(key + "=")]
    variable = "TIMESYNC_" + key.upper().replace(".", "_")
    assert error(*others) == (
        f"config error: {key} is required (set it in the file, as {variable}, or --set {key}=...)"
    )


@pytest.mark.parametrize("key", ["bootstrap.servers", "input.topics", "output.topic"])
def test_a_required_key_may_not_be_empty(key: str) -> None:
    assert error(*REQUIRED, f"{key}=").startswith(f"config error: {key} = '' (from --set): ")


# -- files that cannot be read ------------------------------------------------------------------


def test_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.properties"
    assert (
        error(path=path) == f"config error: cannot read config file {str(path)!r}: No such file or directory"
    )


def test_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "c.properties"
    path.write_bytes(b"output.topic=\xff\n")
    assert error(path=path) == f"config error: config file {str(path)!r} is not UTF-8 text (byte 13)"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: [b\n", "is not valid YAML: while parsing a flow sequence"),
        ("- a\n- b\n", "must hold a mapping of keys to values"),
        ("input:\n  topics: [[a], b]\n", "'input.topics' (from "),
    ],
)
def test_yaml_that_is_not_a_flat_or_nested_mapping_of_plain_values(
    tmp_path: Path, text: str, expected: str
) -> None:
    assert expected in error(path=write(tmp_path, "c.yaml", text))


def test_yaml_aliases_cannot_make_the_loader_expand_without_end(tmp_path: Path) -> None:
    """A billion-laughs file fails at the first list of lists, a nest of mappings at the first key
    that cannot exist, without expanding either."""
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    path = write(tmp_path, "lol.yaml", "\n".join(levels) + "\n")
    assert "'a1' (from " in error(path=path)

    nested = write(tmp_path, "deep.yaml", "ssl: &s {ssl: *s}\n")
    assert error(path=nested).startswith("config error: unknown key 'ssl.ssl'")


def test_a_properties_line_with_no_key_is_reported_by_number(tmp_path: Path) -> None:
    path = write(tmp_path, "c.properties", "bootstrap.servers=x\n= value\n")
    assert error(path=path) == f"config error: {str(path)!r} line 2: expected key=value, found no key"


def test_set_without_equals() -> None:
    assert error("output.topic") == "config error: --set expects key=value, got 'output.topic'"


# -- secrets ------------------------------------------------------------------------------------

SECURE = [
    *REQUIRED,
    "security.protocol=SASL_SSL",
    "sasl.mechanism=SCRAM-SHA-512",
    "sasl.username=timesync",
    f"sasl.password={SECRET}",
    f"ssl.password={SECRET}-key",
]


def test_secrets_are_masked_in_redacted_and_kept_for_the_clients() -> None:
    config = load(*SECURE)
    shown = config.redacted()

    assert shown["sasl.password"] == shown["ssl.password"] == "********"
    assert shown["sasl.username"] == "timesync"
    assert SECRET not in repr(shown)
    assert SECRET not in repr(config)
    assert SECRET not in str(config)
    assert config.sasl_password.get_secret_value() == SECRET
    assert config.ssl_password.get_secret_value() == f"{SECRET}-key"


def test_an_unset_secret_shows_as_empty_not_as_a_mask() -> None:
    assert load(*REQUIRED).redacted()["sasl.password"] == ""


def test_no_error_message_repeats_a_secret(tmp_path: Path) -> None:
    # The secret is accepted, something else is wrong: the message names the other key.
    assert SECRET not in error(*SECURE, "linger.ms=x")
    assert SECRET not in error(*SECURE, "nope=1")
    assert SECRET not in error(*SECURE, env={"TIMESYNC_NOPE": "1"})
    # Typed without "=": the key is named, the rest hidden.
    assert error(*REQUIRED, f"sasl.password:{SECRET}") == (
        "config error: --set expects key=value, got 'sasl.password' followed by a hidden value"
    )
    # Java .properties allow "key value": the secret is read, never echoed.
    path = write(tmp_path, "c.properties", f"sasl.password {SECRET}\nssl.password\t{SECRET}\n")
    secure = [*REQUIRED, "security.protocol=SASL_SSL", "sasl.username=u"]
    assert load(*secure, path=path).sasl_password.get_secret_value() == SECRET
    assert SECRET not in error(*secure, "linger.ms=x", path=path)
    assert SECRET not in error(*REQUIRED, path=path), "nor when refused for PLAINTEXT"
    broken = write(tmp_path, "d.properties", f"sasl.password {SECRET}\n:{SECRET}\n")
    assert SECRET not in error(path=broken)


# -- the CLI ------------------------------------------------------------------------------------


def run_cli(argv: list[str]) -> int:
    try:
        return cli.main(argv)
    except SystemExit as e:  # argparse's own errors
        return int(e.code or 0)


@pytest.mark.parametrize(
    "argv",
    [
        ["--set", "bootstrap.servers=x", "--set", "input.topics=a"],
        ["--set", "nope=1"],
        ["--config", "/nonexistent/timesync.yaml"],
        ["--set", "max.task.idle.ms=soon", *(a for s in REQUIRED for a in ("--set", s))],
        ["--bogus-flag"],
    ],
)
def test_cli_config_errors_exit_2_with_exactly_one_line_on_stderr(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in os.environ if n.startswith("TIMESYNC_")]:
        monkeypatch.delenv(name)

    code = run_cli(argv)

    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1, err
    assert err.endswith("\n")
    assert err.startswith("timesync-sidecar: ")


# -- hardening: what start-up refuses -----------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "timesync.example"])
def test_acting_endpoints_off_loopback_need_a_token_naming_both_keys(host: str) -> None:
    message = error(*REQUIRED, f"http.host={host}")
    assert f"http.host={host} is not a loopback address and http.auth.token is not set" in message
    assert load(*REQUIRED, f"http.host={host}", "http.auth.token=t0ken").http_host == host
    assert load(*REQUIRED, f"http.host={host}", "http.port=0").http_port == 0, "no server, no rule"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_a_loopback_host_needs_no_token(host: str) -> None:
    assert load(*REQUIRED, f"http.host={host}").http_host == host


def test_an_empty_http_host_is_refused_rather_than_binding_every_interface() -> None:
    assert "http.host is empty, which would bind every interface" in error(*REQUIRED, "http.host=")
    assert "http.host is empty" in error(*REQUIRED, "http.auth.token=t", env={"TIMESYNC_HTTP_HOST": " "})


def test_the_mesh_case_exits_2_at_start_with_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # As the image and the chart bind it: 0.0.0.0, no token. Behind Istio every caller is 127.0.0.6.
    for name in [n for n in os.environ if n.startswith("TIMESYNC_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("TIMESYNC_HTTP_HOST", "0.0.0.0")
    assert run_cli([a for s in REQUIRED for a in ("--set", s)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "http.host=0.0.0.0" in err
    assert "http.auth.token" in err


@pytest.mark.parametrize(
    ("keys", "named"),
    [
        (["ssl.cafile=/ca.pem"], "ssl.cafile"),
        (["sasl.username=u", f"sasl.password={SECRET}"], "sasl.username, sasl.password"),
        (["sasl.mechanism=SCRAM-SHA-512"], "sasl.mechanism"),
        (["security.protocol=SSL", "sasl.username=u"], "sasl.username"),
        (["security.protocol=SASL_PLAINTEXT", "sasl.username=u", "ssl.cafile=/ca.pem"], "ssl.cafile"),
    ],
)
def test_ssl_and_sasl_keys_the_protocol_would_ignore_are_refused(keys: list[str], named: str) -> None:
    message = error(*REQUIRED, *keys)
    assert f"config error: {named} set, but security.protocol=" in message
    assert SECRET not in message


def test_ssl_and_sasl_keys_at_their_defaults_are_no_mistake() -> None:
    assert load(*REQUIRED, "ssl.check.hostname=true", "sasl.mechanism=PLAIN").security_protocol == "PLAINTEXT"
    assert (
        load(*REQUIRED, "security.protocol=SASL_SSL", "sasl.username=u", "ssl.cafile=/ca").ssl_cafile == "/ca"
    )


def test_yaml_keeps_a_token_and_a_topic_as_written(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "c.yaml",
        "bootstrap.servers: k:9092\ninput.topics: [0x1F, 012]\noutput.topic: 1_000\n"
        "http:\n  auth:\n    token: 0x1F\n  port: 8081\nssl.check.hostname: no\n"
        "security.protocol: SSL\n",
    )
    config = load(path=path)
    assert config.http_auth_token.get_secret_value() == "0x1F"
    assert config.topics == ["0x1F", "012"]
    assert config.output_topic == "1_000"
    assert config.http_port == 8081
    assert config.ssl_check_hostname is False


@pytest.mark.parametrize(
    "item",
    [
        f"SASL.PASSWORD {SECRET}",
        f"sasl_password:{SECRET}",
        f"Http.Auth.Token {SECRET}",
        f"ssl-password {SECRET}",
    ],
)
def test_a_mistyped_secret_in_set_is_never_echoed(item: str) -> None:
    message = error(*REQUIRED, item)
    assert SECRET not in message
    assert "followed by a hidden value" in message


def test_an_unknown_secret_looking_key_is_named_without_its_value() -> None:
    message = error(*REQUIRED, f"sasl.password {SECRET}=x")
    assert SECRET not in message
