"""Full outages of a single broker, several in one run, under running sidecars.

The single-broker counterpart of the three-broker cluster's outage test
(``test_cluster_faults.py``): the broker is stopped and started again on its data dir
``Size.outages`` times, each outage of a random length (5-60 s at full size) and at least until
both sidecars say degraded. Asserts nothing lost, nothing twice under ``exactly_once_v2``, the
sidecars never exit, ``/healthz`` degraded during each outage and healthy after it; prints the
time to recover.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import Size
from .scenario import failures, play
from .steps import full_outages

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(1500)]


async def test_full_outages_of_a_single_broker(
    request: pytest.FixtureRequest, topic_name: Callable[[str], str], tmp_path: Path, size: Size
) -> None:
    if not size.single_broker_outages:
        pytest.skip("FAULTS_SIZE=full only: at small size test_broker_restart plays a single-broker outage")
    single_node: Any = request.getfixturevalue("single_node")  # started only when it plays
    steps, seed = full_outages(size.outages, size.outage_range_s, replicated=False)
    print(f"\noutage lengths drawn with FAULTS_SEED={seed}")
    outcome = await play(
        single_node,
        "full outages (1 broker)",
        steps,
        topic_name,
        tmp_path,
        size.cluster_records,
        size.cluster_write_s,
        1,
    )
    assert failures(outcome, degraded_each=True) == []
