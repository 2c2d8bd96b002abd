"""Value formats are a table, like the delivery guarantees and the Spark jobs: one list of formats
(``timesync_wire.formats.FORMATS``) that the sidecar's ``timestamp.extractor`` and the Spark jobs'
``--value-format`` both dispatch through, one Spark decoder per format
(``spark_consumer.value_decoders.DECODERS``), and no fallback: a name the table does not hold is
an error everywhere. A toy format registered in the two tables reaches the config, the sidecar's
extractor and the Spark options without another change — docs/architecture.md's recipe."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import pytest

import timesync_wire.formats
from sidecar.config import ConfigError, load_config
from sidecar.core import Record
from sidecar.extractors.plain import ValueTimestamp
from spark_consumer import value_decoders
from spark_consumer.cli import build_parser
from spark_consumer.common_options import registry_values, require_value_schema
from spark_consumer.options import UsageError
from spark_consumer.value_decoders import DECODERS, TextDecoder, spark_decoder
from timesync_wire.formats import FORMATS, UnknownFormatError, ValueFormat, value_format

REQUIRED = ["bootstrap.servers=127.0.0.1:9092", "input.topics=a", "output.topic=out"]
SPARK = [
    "aggregate",
    "--bootstrap-servers",
    "b:9092",
    "--topic",
    "t",
    "--checkpoint",
    "/tmp/x",
    "--size",
    "5s",
]


def test_every_format_has_one_spark_decoder_and_they_agree_on_the_registry() -> None:
    assert list(DECODERS) == list(FORMATS)
    for name, decoder in DECODERS.items():
        assert decoder.format is FORMATS[name]
        assert decoder.registry == (FORMATS[name].schema_type is not None)


@pytest.mark.parametrize("name", ["jsn", "Avro", "proto", ""])
def test_an_unknown_format_is_an_error_in_every_half_never_a_fallback(name: str) -> None:
    with pytest.raises(UnknownFormatError, match="known: json, avro, protobuf"):
        value_format(name)
    with pytest.raises(ConfigError, match=r"timestamp\.extractor"):
        load_config(None, [*REQUIRED, f"timestamp.extractor={name}:ts"], {})
    with pytest.raises(UsageError, match="--value-format"):
        spark_decoder(name)
    with pytest.raises(UsageError, match="invalid choice"):
        build_parser().parse_args([*SPARK, "--value-format", name])


# --- a toy format: ASCII decimal milliseconds, read as they are ----------------------------------


class DecimalMillis:
    def millis(self, value: bytes, start: int = 0) -> int:
        text = value[start:].decode("ascii", "replace")
        if not text.isdigit():
            raise ValueError(f"value {text[:20]!r} is not a decimal number of milliseconds")
        return int(text)


class ToyFormat(ValueFormat):
    name: ClassVar[str] = "toy"
    schema_type: ClassVar[str | None] = None

    def time_reader(
        self, path: Sequence[str], unit: Any, schema: Any = None, indexes: Sequence[int] = ()
    ) -> DecimalMillis:
        return DecimalMillis()


class ToyDecoder(TextDecoder):
    name: ClassVar[str] = "toy"


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy in both tables, as its recipe adds it: a line in FORMATS and one in DECODERS."""
    monkeypatch.setattr(timesync_wire.formats, "FORMATS", {**FORMATS, "toy": ToyFormat()})
    monkeypatch.setattr(value_decoders, "DECODERS", {**DECODERS, "toy": ToyDecoder()})


def test_a_toy_format_reaches_the_config_and_the_sidecars_extractor(toy: None) -> None:
    config = load_config(None, [*REQUIRED, "timestamp.extractor=toy:value"], {})
    extractor = config.task_config().extractor
    assert isinstance(extractor, ValueTimestamp)
    records = [Record("a", 0, 0, 1, value=b"1700000000123"), Record("a", 0, 1, 1, value=b"soon")]
    assert extractor.extract_all(records) == [1_700_000_000_123, -1]
    assert extractor.explain(records[1]) == "value 'soon' is not a decimal number of milliseconds"
    assert config.value_format is timesync_wire.formats.FORMATS["toy"]


def test_a_toy_format_reaches_the_spark_options(toy: None) -> None:
    args = build_parser().parse_args([*SPARK, "--value-format", "toy"])
    assert registry_values(args) is None, "a format read as it is: nothing to fetch"
    with pytest.raises(UsageError, match="--value-schema: required"):
        require_value_schema(args, reads_value_fields=True)
    registry = build_parser().parse_args(
        [*SPARK, "--value-format", "toy", "--schema-registry-url", "http://r"]
    )
    with pytest.raises(UsageError, match="--schema-registry-url: only with --value-format avro or protobuf"):
        registry_values(registry)
