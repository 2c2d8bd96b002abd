"""A suppress checkpoint of another state layout is refused in one line, before Spark starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_consumer import sinks
from spark_consumer.jobs import JobOutput
from spark_consumer.jobs.suppress_checkpoint import check_layout
from spark_consumer.options import UsageError
from spark_consumer.sinks import SinkOptions

VARIABLE = "key_state_v2"


def write_metadata(checkpoint: Path, operator: str, variables: list[str], batch: int = 0) -> None:
    """Operator metadata as Spark 4.2 writes it (``state/<op>/_metadata/v2/<batch>``)."""
    properties = {
        "timeMode": "EventTime",
        "outputMode": "Append",
        "stateVariables": [
            {"stateName": v, "stateVariableType": "ValueState", "ttlEnabled": False} for v in variables
        ],
    }
    meta = {
        "operatorInfo": {"operatorId": 0, "operatorName": operator},
        "stateStoreInfo": [],
        "operatorPropertiesJson": json.dumps(properties),
    }
    folder = checkpoint / "state" / "0" / "_metadata" / "v2"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / str(batch)).write_text("v2\n" + json.dumps(meta), encoding="utf-8")


def test_the_pandas_layout_is_refused_saying_what_to_do(tmp_path: Path) -> None:
    old = ["evicted", "stream_time", "$eventTimers_keyToTimestamp", "replay_ids", "windows"]
    write_metadata(tmp_path, "transformWithStateInPandasExec", old)
    with pytest.raises(UsageError) as error:
        check_layout(str(tmp_path), VARIABLE)
    message = str(error.value)
    assert "\n" not in message
    assert f"--checkpoint: {tmp_path} holds suppress state of an earlier layout" in message
    assert "evicted, stream_time, replay_ids, windows" in message
    assert "start from a new --checkpoint" in message


def test_a_jvm_layout_of_another_version_is_refused(tmp_path: Path) -> None:
    write_metadata(tmp_path, "transformWithStateExec", ["key_state_v1", "$eventTimers_keyToTimestamp"])
    with pytest.raises(UsageError):
        check_layout(f"file://{tmp_path}", VARIABLE)


def test_this_layout_a_new_checkpoint_and_a_remote_one_are_accepted(tmp_path: Path) -> None:
    check_layout(str(tmp_path / "new"), VARIABLE)
    check_layout("s3a://bucket/checkpoint", VARIABLE)
    write_metadata(tmp_path, "transformWithStateInPandasExec", ["stream_time"], batch=3)
    write_metadata(tmp_path, "transformWithStateExec", [VARIABLE, "$eventTimers_keyToTimestamp"], batch=12)
    check_layout(str(tmp_path), VARIABLE)  # the newest metadata is the one Spark resumes from


def test_the_sink_checks_the_checkpoint_before_it_starts_the_query(tmp_path: Path) -> None:
    write_metadata(tmp_path, "transformWithStateInPandasExec", ["stream_time"])
    output = JobOutput(None, "append", check_checkpoint=lambda path: check_layout(path, VARIABLE))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="earlier layout"):
        sinks.start(output, SinkOptions("console", checkpoint=str(tmp_path)))
