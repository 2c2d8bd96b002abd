"""--value-format avro|protobuf at plan time: the subject's schemas fetched before Spark starts,
one-line errors that keep secrets out, framing and Protobuf rows as plain Python (no Spark)."""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

import pytest
from google.protobuf import message_factory
from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_consumer import framing
from spark_consumer.cli import main
from spark_consumer.options import UsageError
from spark_consumer.protobuf_rows import FramedDecoder, file_descriptor, message_descriptor, struct_type
from spark_consumer.protobuf_schema import ProtoCompileError, compile_descriptor_set
from spark_consumer.schema_registry import (
    RegistryClient,
    RegistryError,
    RegistrySettings,
    shown_url,
    value_subject,
)
from spark_consumer.value_formats import AvroValues, ProtobufValues, plan_values
from tests.spark.fake_registry import fake_registry, versions

V1 = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]})
V2 = json.dumps(
    {
        "type": "record",
        "name": "R",
        "fields": [{"name": "a", "type": "long"}, {"name": "b", "type": "string", "default": ""}],
    }
)
COMMON = ["--bootstrap-servers", "127.0.0.1:1", "--topic", "t", "--checkpoint", "/tmp/unused"]
AGGREGATE = ["aggregate", *COMMON, "--sink", "console", "--size", "5s", "--key-field", "a"]
JOIN = ["join", *COMMON, "--sink", "console", "--left", "a", "--right", "b", "--within", "1s"]


# --- framing ------------------------------------------------------------------------------------


def test_an_avro_frame_is_magic_zero_a_big_endian_id_then_the_body() -> None:
    value = b"\x00\x00\x00\x01\x02body"
    assert framing.split(value) == framing.Frame(258, (), b"body")
    assert framing.frame(258, b"body") == value


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (None, "null"),
        (b"\x00\x00\x00\x01", "four bytes"),
        (b"\x01\x00\x00\x00\x01body", "magic 1"),
        (b"", "empty"),
    ],
)
def test_what_is_not_framed_gives_none(value: bytes | None, why: str) -> None:
    assert framing.split(value) is None, why


def test_protobuf_first_message_is_a_single_zero_byte_after_the_id() -> None:
    value = b"\x00\x00\x00\x00\x07\x00body"
    assert framing.split(value, protobuf=True) == framing.Frame(7, (0,), b"body")
    assert framing.frame(7, b"body", (0,)) == value


@pytest.mark.parametrize("indexes", [(1,), (0, 2), (3, 0, 1), (70,)])
def test_protobuf_message_indexes_round_trip_as_zigzag_varints(indexes: tuple[int, ...]) -> None:
    value = framing.frame(9, b"xy", indexes)
    assert framing.split(value, protobuf=True) == framing.Frame(9, indexes, b"xy")


def test_protobuf_indexes_that_run_off_the_end_are_not_framed() -> None:
    assert framing.split(b"\x00\x00\x00\x00\x07\x80", protobuf=True) is None


# --- subjects, settings, the client ----------------------------------------------------------


def test_the_value_subject_is_the_topic_name_strategy_unless_overridden() -> None:
    assert value_subject("orders") == "orders-value"
    assert value_subject("orders", "shared-readings") == "shared-readings"


def test_secrets_are_never_shown() -> None:
    settings = RegistrySettings("https://reg:8081/apis/ccompat/v7", basic_auth_user_info="bob:hunter2")
    assert "hunter2" not in repr(settings)
    assert shown_url("https://u:pw@reg:8081/apis/ccompat/v7") == "https://***@reg:8081/apis/ccompat/v7"
    with pytest.raises(UsageError, match="value hidden") as e:
        RegistrySettings("http://reg", basic_auth_user_info="no-colon-secret")
    assert "no-colon-secret" not in str(e.value)


def test_basic_auth_and_bearer_token_are_sent_as_authorization() -> None:
    routes = versions("s", (1, "AVRO", V1))
    with fake_registry(routes) as (url, seen):
        RegistryClient(RegistrySettings(url, basic_auth_user_info="bob:pw")).versions("s")
        RegistryClient(RegistrySettings(url, bearer_auth_token="tok")).versions("s")
    assert seen[0]["Authorization"] == "Basic " + base64.b64encode(b"bob:pw").decode()
    assert seen[1]["Authorization"] == "Bearer tok"


def test_refused_credentials_are_one_line_without_the_secret() -> None:
    refusing = fake_registry({"/subjects/s/versions": (401, {"message": "Unauthorized"})})
    with refusing as (url, _), pytest.raises(RegistryError, match=r"refused the credentials \(401\)") as e:
        RegistryClient(RegistrySettings(url, basic_auth_user_info="bob:hunter2")).versions("s")
    assert "hunter2" not in str(e.value)
    assert "\n" not in str(e.value)


def test_an_unknown_subject_names_it_and_the_option() -> None:
    with fake_registry({}) as (url, _), pytest.raises(RegistryError, match="--value-subject") as e:
        plan_values("avro", RegistryClient(RegistrySettings(url)), "nope-value")
    assert "/subjects/nope-value/versions (404): Subject not found" in str(e.value)


def test_an_unreachable_registry_is_one_line() -> None:
    with pytest.raises(
        RegistryError, match=r"schema registry at http://127\.0\.0\.1:1/subjects/s/versions did"
    ):
        RegistryClient(RegistrySettings("http://127.0.0.1:1"), timeout_s=2).versions("s")


# --- plan_values -----------------------------------------------------------------------------


def test_avro_keeps_every_version_as_a_writer_and_reads_as_the_latest() -> None:
    with fake_registry(versions("t-value", (11, "AVRO", V1), (12, "AVRO", V2))) as (url, _):
        values = plan_values("avro", RegistryClient(RegistrySettings(url)), "t-value")
    assert values == AvroValues("t-value", V2, {11: V1, 12: V2})


def test_avro_references_are_defined_in_the_schemas_spark_reads() -> None:
    from tests.unit.formats.test_avro_references import META, ORDER, REGION

    routes = {
        **versions(
            "t-value",
            (13, "AVRO", json.dumps(ORDER)),
            references=[
                {"name": "common.Meta", "subject": "meta", "version": 1},
                {"name": "common.Region", "subject": "region", "version": 1},
            ],
        ),
        **versions(
            "meta",
            (30, "AVRO", json.dumps(META)),
            references=[{"name": "common.Region", "subject": "region", "version": 1}],
        ),
        **versions("region", (31, "AVRO", json.dumps(REGION))),
    }
    with fake_registry(routes) as (url, _):
        values = plan_values("avro", RegistryClient(RegistrySettings(url)), "t-value")
    assert isinstance(values, AvroValues)
    reader = json.loads(values.reader_schema)
    assert {f["name"]: f["type"] for f in reader["fields"]}["meta"]["name"] == "Meta"  # defined in place
    assert values.writer_schemas == {13: values.reader_schema}


def test_a_subject_of_the_other_format_is_refused() -> None:
    avro_only = fake_registry(versions("t-value", (11, "AVRO", V1)))
    with (
        avro_only as (url, _),
        pytest.raises(UsageError, match=r"'t-value' holds AVRO schemas .* not PROTOBUF"),
    ):
        plan_values("protobuf", RegistryClient(RegistrySettings(url)), "t-value")


UNITS = 'syntax = "proto3";\npackage u;\nenum Unit { C = 0; F = 1; }\n'
READING = """syntax = "proto3";
package r;
import "units.proto";
import "google/protobuf/timestamp.proto";
message Reading {
  string device = 1;
  int32 n = 2;
  u.Unit unit = 3;
  google.protobuf.Timestamp at = 4;
  repeated int64 xs = 5;
  map<string, int32> tags = 6;
  optional int64 maybe = 7;
  message Inner { string s = 1; }
  Inner inner = 8;
}
message Other { string x = 1; }
"""


def _reading_routes() -> dict[str, Any]:
    """Subject ``t-value`` (id 21: READING, which references subject ``units``)."""
    return {
        **versions(
            "t-value",
            (21, "PROTOBUF", READING),
            references=[{"name": "units.proto", "subject": "units", "version": 1}],
        ),
        **versions("units", (20, "PROTOBUF", UNITS)),
    }


def _reading_values(message: str | None = None) -> ProtobufValues:
    with fake_registry(_reading_routes()) as (url, _):
        values = plan_values("protobuf", RegistryClient(RegistrySettings(url)), "t-value", message)
    assert isinstance(values, ProtobufValues)
    return values


def test_protobuf_compiles_the_latest_with_its_references_and_well_known_imports() -> None:
    values = _reading_values()
    message = message_descriptor(file_descriptor(values.descriptor_set, values.file_name), (0,))
    assert message is not None
    assert message.full_name == "r.Reading"
    assert struct_type(message) == StructType(
        [
            StructField("device", StringType()),
            StructField("n", IntegerType()),
            StructField("unit", StringType()),
            StructField("at", TimestampType()),
            StructField("xs", ArrayType(LongType())),
            StructField("tags", MapType(StringType(), IntegerType())),
            StructField("maybe", LongType()),
            StructField("inner", StructType([StructField("s", StringType())])),
        ]
    )


def test_a_framed_protobuf_value_decodes_to_its_row_and_anything_else_to_none() -> None:
    values = _reading_values()
    message = message_descriptor(file_descriptor(values.descriptor_set, values.file_name), (0,))
    cls = message_factory.GetMessageClass(message)
    body = cls(device="d", n=3, unit=1, at={"seconds": 2}, xs=[1, 2], tags={"k": 4}).SerializeToString()
    decode = FramedDecoder(values.descriptor_set, values.file_name, values.schema_ids)

    assert decode(framing.frame(21, body, (0,))) == {
        "device": "d",
        "n": 3,
        "unit": "F",
        "at": dt.datetime(1970, 1, 1, 0, 0, 2, tzinfo=dt.UTC),
        "xs": [1, 2],
        "tags": {"k": 4},
        "maybe": None,  # a field with presence, not set
        "inner": None,  # a message, not set
    }
    assert decode(framing.frame(99, body, (0,))) is None  # an id that is not one of the subject's
    assert decode(framing.frame(21, body, (1,))) is None  # the file's other message
    assert decode(framing.frame(21, body)[:5]) is None  # no message indexes
    assert decode(framing.frame(21, b"\xff\xff", (0,))) is None  # a body that does not parse
    assert decode(b"") is None  # a heartbeat's empty value


@pytest.mark.parametrize(
    ("message", "indexes", "full_name"),
    [
        (None, (0,), "r.Reading"),  # the file's first message
        ("Other", (1,), "r.Other"),  # relative to the package
        ("r.Other", (1,), "r.Other"),
        ("Reading.Inner", (0, 1), "r.Reading.Inner"),  # after the map field's entry type
    ],
)
def test_value_message_chooses_the_message_and_so_the_message_indexes_that_decode(
    message: str | None, indexes: tuple[int, ...], full_name: str
) -> None:
    values = _reading_values(message)
    assert (values.message_indexes, values.message_name) == (indexes, full_name)
    descriptor = message_descriptor(file_descriptor(values.descriptor_set, values.file_name), indexes)
    assert descriptor is not None
    cls = message_factory.GetMessageClass(descriptor)
    first_field = descriptor.fields[0].name  # a string in each of them
    body = cls(**{first_field: "v"}).SerializeToString()
    decode = FramedDecoder(values.descriptor_set, values.file_name, values.schema_ids, values.message_indexes)

    row = decode(framing.frame(21, body, indexes))
    assert row is not None
    assert row[first_field] == "v"
    other = (1,) if indexes != (1,) else (0,)
    assert decode(framing.frame(21, body, other)) is None  # framed as another message of the file


def test_a_value_message_the_schema_does_not_define_names_those_it_does() -> None:
    with pytest.raises(
        UsageError, match=r"--value-message Nope: .* it defines r\.Reading, r\.Reading\.Inner, r\.Other$"
    ):
        _reading_values("Nope")


def test_a_proto_that_does_not_compile_says_where_without_the_temporary_path() -> None:
    with pytest.raises(ProtoCompileError, match=r"'x.proto' does not compile: x.proto:1:\d+: "):
        compile_descriptor_set("x.proto", {"x.proto": 'syntax = "proto3"; message { }'})


# --- the command line --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--value-format", "avro"], "--schema-registry-url: required with --value-format avro"),
        (
            ["--schema-registry-url", "http://r"],
            "--schema-registry-url: only with --value-format avro or protobuf",
        ),
        (
            ["--value-format", "avro", "--schema-registry-url", "http://r", "--value-schema", "a LONG"],
            "--value-schema: not with --value-format avro",
        ),
        (["--value-message", "shop.Payment"], "--value-message: only with --value-format protobuf"),
        (
            [
                "--value-format",
                "avro",
                "--schema-registry-url",
                "http://r",
                "--value-message",
                "shop.Payment",
            ],
            "--value-message: only with --value-format protobuf",
        ),
        (
            ["--value-format", "avro", "--schema-registry-url", "http://127.0.0.1:1"],
            "schema registry at http://127.0.0.1:1/subjects/t-value/versions did not answer",
        ),
    ],
)
def test_registry_mistakes_are_one_line_and_exit_2_before_spark(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*AGGREGATE, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"timesync-spark: error: {message}"), err
    assert err.count("\n") == 1


def test_an_unknown_value_subject_exits_2_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    with fake_registry({}) as (url, _):
        argv = [
            *AGGREGATE,
            "--value-format",
            "avro",
            "--schema-registry-url",
            url,
            "--value-subject",
            "other",
        ]
        assert main(argv) == 2
    assert "/subjects/other/versions (404)" in capsys.readouterr().err


def test_the_registry_secret_from_the_environment_is_sent_and_never_printed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TIMESYNC_SPARK_SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO", "bob:hunter2")
    with fake_registry({"/subjects/t-value/versions": (403, {})}) as (url, seen):
        assert main([*AGGREGATE, "--value-format", "avro", "--schema-registry-url", url]) == 2
    assert seen[0]["Authorization"].startswith("Basic ")
    err = capsys.readouterr().err
    assert "refused the credentials (403)" in err
    assert "hunter2" not in err


def test_a_missing_spark_avro_jar_is_one_line_saying_what_to_do() -> None:
    from types import SimpleNamespace

    from py4j.java_gateway import JavaPackage

    from spark_consumer.session import SessionError
    from spark_consumer.value_decoding import require_spark_avro

    class NoAvroJvm:  # py4j answers a JavaPackage for a class it cannot find
        def __getattr__(self, name: str) -> JavaPackage:
            return JavaPackage(name, None)

    spark = SimpleNamespace(sparkContext=SimpleNamespace(_jvm=NoAvroJvm()))
    with pytest.raises(
        SessionError, match=r"\(spark-avro_2\.13-4\.2\.0\.jar\) are not on Spark's classpath"
    ) as e:
        require_spark_avro(spark)  # type: ignore[arg-type]
    assert "make jars" in str(e.value)
    assert "\n" not in str(e.value)


def test_a_schema_of_several_messages_read_as_its_first_says_so_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from spark_consumer.cli import build_parser
    from spark_consumer.common_options import registry_values

    base = [*AGGREGATE, "--value-format", "protobuf"]
    with fake_registry(_reading_routes()) as (url, _):
        registry_values(build_parser().parse_args([*base, "--schema-registry-url", url]))
        warned = capsys.readouterr().err
        registry_values(
            build_parser().parse_args([*base, "--schema-registry-url", url, "--value-message", "Other"])
        )
        chosen = capsys.readouterr().err

    assert warned == (
        "timesync-spark: warning: subject 't-value' defines several messages; the values are read as its "
        "first, r.Reading (--value-message names another)\n"
    )
    assert chosen == ""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--right-value-subject", "c-value"],
            "--right-value-subject: only with --value-format avro or protobuf",
        ),
        (
            ["--value-format", "avro", "--schema-registry-url", "http://r", "--right-value-message", "C"],
            "--right-value-message: only with --value-format protobuf",
        ),
        (
            ["--value-format", "avro", "--schema-registry-url", "http://r", "--right-value-schema", "a LONG"],
            "--right-value-schema: only with --value-format json; the right side's avro schema is its "
            "subject's (--right-value-subject)",
        ),
    ],
)
def test_join_right_side_value_mistakes_are_one_line_before_spark(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with fake_registry(versions("t-value", (11, "AVRO", V1))) as (url, _):
        argv = [*JOIN, *(url if part == "http://r" else part for part in extra)]
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"timesync-spark: error: {message}"), err
    assert err.count("\n") == 1


def test_the_right_sides_subject_is_fetched_before_spark_starts(capsys: pytest.CaptureFixture[str]) -> None:
    with fake_registry(versions("t-value", (11, "AVRO", V1))) as (url, _):
        argv = [
            *JOIN,
            "--value-format",
            "avro",
            "--schema-registry-url",
            url,
            "--right-value-subject",
            "nope",
        ]
        assert main(argv) == 2
    assert "/subjects/nope/versions (404)" in capsys.readouterr().err


def test_the_right_side_read_as_the_first_of_several_messages_says_so_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from spark_consumer.cli import build_parser
    from spark_consumer.jobs.join_cli import right_registry_values

    with fake_registry(_reading_routes()) as (url, _):
        argv = [
            *JOIN,
            "--value-format",
            "protobuf",
            "--schema-registry-url",
            url,
            "--right-value-subject",
            "t-value",
        ]
        values = right_registry_values(build_parser().parse_args(argv))

    assert isinstance(values, ProtobufValues)
    assert capsys.readouterr().err.endswith("its first, r.Reading (--right-value-message names another)\n")
