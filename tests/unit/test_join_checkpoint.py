"""A join checkpoint of another plan (Spark's own join, or another layout of the operator) is
refused in one line that says where to resume, before Spark starts. The files are written as
Spark 4.2 writes them (copied from a checkpoint of the earlier plan)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_consumer import sinks
from spark_consumer.jobs import JobOutput
from spark_consumer.jobs.join_checkpoint import check_plan
from spark_consumer.options import UsageError
from spark_consumer.sinks import SinkOptions

VARIABLE = "join_buffers_v1"
TOPIC = "ordered"
STORES = (
    "left-keyToNumValues",
    "left-keyWithIndexToValue",
    "right-keyToNumValues",
    "right-keyWithIndexToValue",
)


def v1_metadata(checkpoint: Path, operator_id: int, name: str, stores: tuple[str, ...]) -> None:
    """``state/<op>/_metadata/metadata``, as Spark's join and deduplication write it."""
    info = [{"storeName": s, "numColsPrefixKey": 0, "numPartitions": 2} for s in stores]
    meta = {"operatorInfo": {"operatorId": operator_id, "operatorName": name}, "stateStoreInfo": info}
    folder = checkpoint / "state" / str(operator_id) / "_metadata"
    folder.mkdir(parents=True)
    (folder / "metadata").write_text("v1\n" + json.dumps(meta), encoding="utf-8")


def sparks_join(checkpoint: Path, committed: int | None = 1) -> None:
    """A checkpoint of the earlier plan: the join, each side's deduplication, the offset log of
    batches 0..2 (one line per scan of the topic) and commits up to ``committed``."""
    v1_metadata(checkpoint, 0, "symmetricHashJoin", STORES)
    v1_metadata(checkpoint, 1, "dedupeWithinWatermark", ("default",))
    v1_metadata(checkpoint, 2, "dedupeWithinWatermark", ("default",))
    (checkpoint / "offsets").mkdir()
    (checkpoint / "commits").mkdir()
    for batch in range(3):
        metadata = {"batchWatermarkMs": 1069, "batchTimestampMs": 1795822944443, "conf": {}}
        offsets = json.dumps({TOPIC: {"0": 10 * (batch + 1)}})
        text = "\n".join(["v1", json.dumps(metadata), offsets, offsets])
        (checkpoint / "offsets" / str(batch)).write_text(text, encoding="utf-8")
    for batch in range(committed + 1 if committed is not None else 0):
        (checkpoint / "commits" / str(batch)).write_text(
            'v1\n{"nextBatchWatermarkMs":1069}', encoding="utf-8"
        )


def operator_metadata(checkpoint: Path, variables: list[str]) -> None:
    """``state/0/_metadata/v2/<batch>``, as the operator's ``transformWithStateExec`` writes it."""
    properties = {
        "timeMode": "EventTime",
        "outputMode": "Append",
        "stateVariables": [
            {"stateName": v, "stateVariableType": "ValueState", "ttlEnabled": False} for v in variables
        ],
    }
    meta = {
        "operatorInfo": {"operatorId": 0, "operatorName": "transformWithStateExec"},
        "stateStoreInfo": [],
        "operatorPropertiesJson": json.dumps(properties),
    }
    folder = checkpoint / "state" / "0" / "_metadata" / "v2"
    folder.mkdir(parents=True)
    (folder / "5").write_text("v2\n" + json.dumps(meta), encoding="utf-8")


def test_sparks_own_join_is_refused_saying_where_the_new_checkpoint_should_start(tmp_path: Path) -> None:
    sparks_join(tmp_path)
    with pytest.raises(UsageError) as error:
        check_plan(str(tmp_path), VARIABLE)
    message = str(error.value)
    assert "\n" not in message
    plan = "(symmetricHashJoin, dedupeWithinWatermark)"
    assert message.startswith(f"--checkpoint: {tmp_path} holds the state of another join plan {plan},")
    # Batch 2 was planned but not committed: a new query starts where batch 1 ended.
    assert (
        f"""start from a new --checkpoint with --starting-offsets '{{"{TOPIC}": {{"0": 20}}}}'""" in message
    )
    assert "records waiting there for a partner are not carried over" in message


def test_a_checkpoint_that_committed_nothing_is_refused_without_offsets(tmp_path: Path) -> None:
    sparks_join(tmp_path, committed=None)
    with pytest.raises(UsageError, match=r"start from a new --checkpoint \(records waiting"):
        check_plan(f"file://{tmp_path}", VARIABLE)


def test_another_layout_of_the_operator_is_refused(tmp_path: Path) -> None:
    operator_metadata(tmp_path, ["$eventTimers_keyToTimestamp", "join_buffers_v0"])
    with pytest.raises(UsageError, match=r"\(transformWithStateExec: join_buffers_v0\)"):
        check_plan(str(tmp_path), VARIABLE)


def test_this_layout_a_new_checkpoint_and_a_remote_one_are_accepted(tmp_path: Path) -> None:
    check_plan(str(tmp_path / "new"), VARIABLE)
    check_plan("s3a://bucket/checkpoint", VARIABLE)
    operator_metadata(tmp_path, ["$eventTimers_keyToTimestamp", VARIABLE])
    check_plan(str(tmp_path), VARIABLE)


def test_the_sink_checks_the_checkpoint_before_it_starts_the_query(tmp_path: Path) -> None:
    sparks_join(tmp_path)
    output = JobOutput(None, "append", check_checkpoint=lambda path: check_plan(path, VARIABLE))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="another join plan"):
        sinks.start(output, SinkOptions("console", checkpoint=str(tmp_path)))
