"""When offsets must not change: Kafka Connect's rule (no worker runs), for both groupings."""

from __future__ import annotations

from types import SimpleNamespace

from sidecar.offsets.kafka import Members, _patiently, group_members, refusal
from sidecar.service.claim import STALE_S, Claim

NOW = 1_800_000_000_000
EMPTY = Members("Empty", ())


def test_an_empty_group_without_a_running_claim_may_be_reset() -> None:
    assert refusal("g", EMPTY, [None, Claim("pod-a", NOW - 1000, "stopped")], NOW) is None


def test_a_group_that_never_existed_may_be_reset() -> None:
    assert refusal("g", Members("Dead", ()), [], NOW) is None


def test_members_of_the_group_refuse_it() -> None:
    refused = refusal("g", Members("Stable", ("10.0.0.7", "10.0.0.8")), [], NOW)
    assert str(refused) == (
        "group g has 2 active member(s) (state Stable, hosts 10.0.0.7, 10.0.0.8): "
        "stop every sidecar of the group, then reset"
    )


def test_a_rebalancing_group_refuses_it_even_before_members_are_listed() -> None:
    assert refusal("g", Members("PreparingRebalance", ()), [], NOW) is not None


def test_a_fresh_running_claim_refuses_it_whichever_host_wrote_it() -> None:
    refused = refusal("g", EMPTY, [Claim("this-host", NOW - 4000, "running")], NOW)
    assert str(refused).startswith(
        "a sidecar (host this-host) is running group g: its claim was renewed 4 s ago"
    )


def test_a_stale_running_claim_no_longer_refuses() -> None:
    assert refusal("g", EMPTY, [Claim("gone", NOW - int(STALE_S * 1000) - 1, "running")], NOW) is None


async def test_a_coordinator_still_loading_the_group_is_asked_again_not_an_error() -> None:
    # A new group's first commit (the reset's fence) makes its coordinator load it: DescribeGroups
    # answers COORDINATOR_LOAD_IN_PROGRESS (14) for a moment.
    answers = [14, 0]

    class Admin:
        async def describe_consumer_groups(self, groups: list[str]) -> list[SimpleNamespace]:
            return [SimpleNamespace(groups=[(answers.pop(0), "g", "Empty", "consumer", "", [])])]

    assert await _patiently(lambda: group_members(Admin(), "g")) == EMPTY  # type: ignore[arg-type]
    assert answers == []
