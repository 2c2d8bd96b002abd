"""The bounds on one value: read from Spark settings, handed to Java Avro as JVM options of the
driver and the executors, and Avro schemas whose values no bound reaches refused at plan time."""

from __future__ import annotations

import json
from typing import Any

import pytest

from spark_consumer.options import UsageError
from spark_consumer.schema_registry import RegistryClient, RegistrySettings
from spark_consumer.session import SessionOptions, session_conf
from spark_consumer.value_formats import plan_values
from spark_consumer.value_limits import (
    AVRO_BYTES,
    AVRO_COLLECTION_ITEMS,
    AVRO_STRING_BYTES,
    MAX_BYTES_KEY,
    MAX_ITEMS_KEY,
    ValueLimits,
    unbounded_arrays,
)
from tests.spark.fake_registry import fake_registry, versions


def test_the_defaults_are_16_mib_and_2_to_the_20_items() -> None:
    assert ValueLimits.from_conf({}) == ValueLimits(16 << 20, 1 << 20)
    assert ValueLimits().java_properties() == {
        AVRO_COLLECTION_ITEMS: str(1 << 20),
        AVRO_STRING_BYTES: str(16 << 20),
        AVRO_BYTES: str(16 << 20),
    }


def test_spark_settings_set_the_bounds() -> None:
    assert ValueLimits.from_conf({MAX_BYTES_KEY: "1024", MAX_ITEMS_KEY: "10"}) == ValueLimits(1024, 10)


@pytest.mark.parametrize("text", ["0", "-1", "1e6", "", str(1 << 31)])
def test_a_bound_that_is_not_a_whole_number_java_can_allocate_is_one_line(text: str) -> None:
    with pytest.raises(
        UsageError, match=rf"^--conf {MAX_ITEMS_KEY}={text}: expected a whole number from 1 to"
    ):
        ValueLimits.from_conf({MAX_ITEMS_KEY: text})


def test_the_driver_and_the_executors_get_java_avros_bounds() -> None:
    conf = session_conf(SessionOptions(jars_dir=None, packages="auto", conf={MAX_ITEMS_KEY: "500"}))
    options = "-Dorg.apache.avro.limits.collectionItems.maxLength=500"
    assert options in conf["spark.driver.extraJavaOptions"]
    assert "-Dlog4j2.configurationFile=" in conf["spark.driver.extraJavaOptions"]
    assert options in conf["spark.executor.extraJavaOptions"]


def test_a_users_jvm_options_come_after_ours_so_theirs_win() -> None:
    mine = "-Dorg.apache.avro.limits.string.maxLength=99 -XX:+UseG1GC"
    conf = session_conf(
        SessionOptions(
            packages="auto",
            conf={"spark.executor.extraJavaOptions": mine, "spark.driver.extraJavaOptions": mine},
        )
    )
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        assert conf[key].endswith(f" {mine}")
        assert f"-D{AVRO_STRING_BYTES}={16 << 20}" in conf[key]


# --- Avro schemas whose values no bound reaches --------------------------------------------------


def record(name: str, *fields: tuple[str, Any], **more: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in fields], **more}


def array(items: Any) -> dict[str, Any]:
    return {"type": "array", "items": items}


EMPTY = record("Empty")
ZERO = {"type": "fixed", "name": "Zero", "size": 0}


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        (record("R", ("xs", array(array("null")))), "xs[][]"),
        (record("R", ("xs", array(array({"type": "null"})))), "xs[][]"),
        (record("R", ("m", {"type": "map", "values": array("null")})), "m{}[]"),
        (record("R", ("xs", array(record("I", ("ys", array(EMPTY)))))), "xs[].ys[]"),
        (record("R", ("z", ZERO), ("xs", array(array("Zero")))), "xs[][]"),
        (record("R", ("e", record("E", namespace="other")), ("xs", array(array("other.E")))), "xs[][]"),
        (record("R", ("e", EMPTY), ("xs", array(array("Empty"))), namespace="ns"), "xs[][]"),  # ns.Empty
        (array(array("null")), "[][]"),
    ],
)
def test_arrays_of_items_that_take_no_bytes_inside_a_collection_are_found(schema: Any, where: str) -> None:
    assert unbounded_arrays(json.dumps(schema)) == where


@pytest.mark.parametrize(
    "schema",
    [
        record("R", ("xs", array("null"))),  # one such array: at most maxCollectionItems items
        record("R", ("xs", array(array("long")))),  # every item costs a byte
        record("R", ("xs", array(array(["null"])))),  # a union costs its index
        record("R", ("xs", array(array({"type": "enum", "name": "E", "symbols": ["A"]})))),
        record("R", ("m", {"type": "map", "values": "null"})),  # every entry costs its key
        record("L", ("v", "long"), ("next", ["null", "L"])),  # recursive
        record("T", ("kids", array("T"))),  # recursive through an array
        record("R", ("e", record("E", ("x", "int"))), ("xs", array(array("E")))),
    ],
)
def test_collections_whose_items_cost_bytes_are_bounded(schema: Any) -> None:
    assert unbounded_arrays(json.dumps(schema)) is None


def test_a_subject_with_such_an_array_in_any_version_is_refused_before_spark() -> None:
    v1 = json.dumps(record("R", ("a", "long"), ("xs", array(array("null")))))
    v2 = json.dumps(record("R", ("a", "long")))
    refused = r"^--value-format avro: subject 't-value' \(version 1, id 11\): xs\[\]\[\] is an array of items"
    with (
        fake_registry(versions("t-value", (11, "AVRO", v1), (12, "AVRO", v2))) as (url, _),
        pytest.raises(UsageError, match=refused),
    ):
        plan_values("avro", RegistryClient(RegistrySettings(url)), "t-value")
