"""Who is in the group, as DescribeGroups answers: a coordinator still loading is asked again."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from aiokafka.errors import GroupLoadInProgressError, NotCoordinatorForGroupError

from sidecar.kafka.admin import AdminError
from sidecar.offsets.kafka import Members, group_members
from sidecar.service.failures import is_retriable


class Admin:
    """Answers DescribeGroups for group ``g`` with ``code``, the state and members given."""

    def __init__(self, code: int, state: str = "Empty", hosts: tuple[str, ...] = ()) -> None:
        members = [("member", "client", f"/{host}", b"", b"") for host in hosts]
        self.described = (code, "g", state, "consumer", "", members)

    async def describe_consumer_groups(self, groups: list[str]) -> list[SimpleNamespace]:
        return [SimpleNamespace(groups=[self.described])]


async def test_members_and_state_are_read_from_the_answer() -> None:
    assert await group_members(Admin(0, "Stable", ("10.0.0.7",)), "g") == Members("Stable", ("10.0.0.7",))  # type: ignore[arg-type]


@pytest.mark.parametrize("error", [GroupLoadInProgressError, NotCoordinatorForGroupError])
async def test_a_coordinator_loading_or_moving_is_a_retriable_error_not_a_refusal(
    error: type[Exception],
) -> None:
    # On a fresh cluster the first DescribeGroups meets the offsets topic being created.
    with pytest.raises(error) as raised:
        await group_members(Admin(error.errno), "g")  # type: ignore[arg-type,attr-defined]
    assert is_retriable(raised.value)


async def test_any_other_code_is_a_refusal_that_names_it() -> None:
    with pytest.raises(AdminError, match="cannot describe group g: GroupAuthorizationFailedError"):
        await group_members(Admin(30), "g")  # type: ignore[arg-type]
