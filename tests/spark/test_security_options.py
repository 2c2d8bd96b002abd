"""The Spark job's security options become the Java Kafka client's settings, checked before Spark starts.

No Spark and no broker here; ``test_security.py`` runs a job against the SASL listener.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_consumer.cli import Plan, build_parser, main
from spark_consumer.options import UsageError
from spark_consumer.security import KafkaSecurity

PASSWORD = 'pa"ss\\word=1'
COMMON = ["--bootstrap-servers", "127.0.0.1:1", "--topic", "t", "--checkpoint", "/tmp/unused"]
CONSOLE = ["aggregate", *COMMON, "--sink", "console", "--size", "5s"]


def plan(*extra: str, env: dict[str, str] | None = None, monkeypatch: pytest.MonkeyPatch) -> Plan:
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    return Plan(build_parser().parse_args([*CONSOLE, *extra]))


def test_plaintext_adds_no_options() -> None:
    assert KafkaSecurity().kafka_options() == {}


def test_scram_becomes_a_jaas_line_with_the_password_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    p = plan(
        "--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "u",
        env={"TIMESYNC_SPARK_SASL_PASSWORD": PASSWORD},
        monkeypatch=monkeypatch,
    )  # fmt: skip

    assert dict(p.source.kafka_options) == {
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="u" password="pa\\"ss\\\\word=1";',
    }
    assert dict(p.sink.kafka_options) == dict(p.source.kafka_options), "the Kafka sink connects alike"


def test_plain_uses_the_plain_login_module() -> None:
    options = KafkaSecurity("SASL_SSL", "PLAIN", "u", "p").kafka_options()
    assert options["kafka.sasl.jaas.config"].startswith(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
    )
    assert "kafka.ssl.truststore.location" not in options, "no CA given: the JVM's default trust"


def test_tls_with_a_pem_ca_a_pkcs12_client_key_and_no_host_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca, keystore = tmp_path / "ca.pem", tmp_path / "client.p12"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    keystore.write_bytes(b"\x30")
    p = plan(
        "--security-protocol", "SSL", "--ssl-cafile", str(ca), "--ssl-keystore", str(keystore),
        "--no-ssl-check-hostname",
        env={"TIMESYNC_SPARK_SSL_PASSWORD": "key-secret"},
        monkeypatch=monkeypatch,
    )  # fmt: skip

    assert dict(p.source.kafka_options) == {
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(ca),
        "kafka.ssl.endpoint.identification.algorithm": "",
        "kafka.ssl.keystore.type": "PKCS12",
        "kafka.ssl.keystore.location": str(keystore),
        "kafka.ssl.keystore.password": "key-secret",
    }


def test_a_pem_keystore_takes_its_password_as_the_key_password(tmp_path: Path) -> None:
    keystore = tmp_path / "client.pem"
    keystore.write_text("-----BEGIN PRIVATE KEY-----\n")
    options = KafkaSecurity("SSL", ssl_keystore=str(keystore), ssl_password="k").kafka_options()
    assert options["kafka.ssl.keystore.type"] == "PEM"
    assert options["kafka.ssl.key.password"] == "k"


def test_an_explicit_kafka_option_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    p = plan(
        "--security-protocol", "SASL_PLAINTEXT", "--sasl-username", "u",
        "--kafka-option", "kafka.sasl.mechanism=SCRAM-SHA-256",
        env={"TIMESYNC_SPARK_SASL_PASSWORD": "p"},
        monkeypatch=monkeypatch,
    )  # fmt: skip
    assert p.source.kafka_options["kafka.sasl.mechanism"] == "SCRAM-SHA-256"


def test_aiokafka_options_for_the_output_topic_check(tmp_path: Path) -> None:
    options = KafkaSecurity("SASL_PLAINTEXT", "SCRAM-SHA-512", "u", "p").aiokafka_options()
    assert options == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "u",
        "sasl_plain_password": "p",
    }


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (
            ["--security-protocol", "SASL_SSL"],
            {},
            "--sasl-username: required with --security-protocol SASL_SSL",
        ),
        (
            ["--security-protocol", "SASL_PLAINTEXT", "--sasl-username", "u"],
            {},
            "TIMESYNC_SPARK_SASL_PASSWORD: set it to the SASL password",
        ),
        (
            ["--sasl-username", "u"],
            {},
            "--sasl-username: needs --security-protocol SASL_PLAINTEXT or SASL_SSL",
        ),
        (["--ssl-cafile", "/etc/ca.pem"], {}, "--ssl-*: needs --security-protocol SSL or SASL_SSL"),
        (["--security-protocol", "SSL", "--ssl-cafile", "/nonexistent/ca.pem"], {}, "is not a readable file"),
        (["--security-protocol", "SSL", "--ssl-keystore", "client.key"], {}, "should end in .p12, .pfx"),
        (
            ["--security-protocol", "SSL", "--ssl-keystore", "c.p12"],
            {},
            "TIMESYNC_SPARK_SSL_PASSWORD: set it",
        ),
        (["--security-protocol", "TLS"], {}, "argument --security-protocol: invalid choice: 'TLS'"),
    ],
)
def test_bad_security_options_are_one_line_usage_errors_before_spark_starts(
    argv: list[str],
    env: dict[str, str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TIMESYNC_SPARK_SASL_PASSWORD", raising=False)
    monkeypatch.delenv("TIMESYNC_SPARK_SSL_PASSWORD", raising=False)

    assert main([*CONSOLE, *argv]) == 2

    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert message in err


def test_passwords_stay_out_of_repr_and_usage_errors(tmp_path: Path) -> None:
    security = KafkaSecurity("SASL_PLAINTEXT", "SCRAM-SHA-512", "u", PASSWORD)
    assert PASSWORD not in repr(security)
    with pytest.raises(UsageError) as failed:
        KafkaSecurity("SASL_SSL", "PLAIN", "u", PASSWORD, ssl_keystore=str(tmp_path / "x.key"))
    assert PASSWORD not in str(failed.value)


@pytest.mark.parametrize(
    "pair",
    [
        f'kafka.sasl.jaas.config ...ScramLoginModule required username="u" password="{PASSWORD}";',
        f"kafka.ssl.key.password {PASSWORD}",
        f"kafka.ssl.truststore.location:{PASSWORD}",
        PASSWORD.replace("=", ""),
    ],
)
def test_a_kafka_option_without_equals_is_refused_without_repeating_its_value(
    pair: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*CONSOLE, "--kafka-option", pair]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "is not key=value" in err
    assert PASSWORD.replace("=", "") not in err
    assert 'pa"ss' not in err
