"""The registry protocol both transports drive: the paths asked, what a version's answer holds,
and the walk through references (each subject version once, bounded), without I/O."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timesync_wire.registry.answers import MAX_REFERENCES, Reference, RegistryError, SchemaUnreadableError
from timesync_wire.registry.protocol import (
    MAX_VERSIONS,
    ReferenceWalk,
    SubjectVersion,
    schema_by_id,
    subject_version,
    subject_version_of,
    version_list,
)
from timesync_wire.registry.settings import RegistrySettings


def test_paths_are_confluents_with_the_subject_quoted() -> None:
    assert schema_by_id(7) == "/schemas/ids/7"
    assert subject_version("a/b c", 3) == "/subjects/a%2Fb%20c/versions/3"
    assert subject_version("s", "latest") == "/subjects/s/versions/latest"


def test_settings_send_basic_before_bearer_and_never_show_a_secret() -> None:
    both = RegistrySettings("https://r/", basic_auth_user_info="bob:hunter2", bearer_auth_token="tok-1234")
    assert both.headers()["Authorization"].startswith("Basic ")
    assert both.headers()["Accept-Encoding"] == "identity"
    assert both.base == "https://r"
    assert "hunter2" not in repr(both) and "tok-1234" not in repr(both)  # noqa: PT018
    assert {"hunter2", "bob:hunter2", "tok-1234"} <= set(both.secrets())


def test_the_walk_fetches_each_subject_version_once_and_follows_their_own_references() -> None:
    registry = {
        ("a", 1): ("A", (Reference("b.proto", "b", 1),)),
        ("b", 1): ("B", (Reference("a.proto", "a", 1),)),  # a cycle back to a
    }
    walk = ReferenceWalk([Reference("a.proto", "a", 1), Reference("a.proto", "a", 1)])
    asked = []
    while (ref := walk.next()) is not None:
        asked.append((ref.subject, ref.version))
        walk.found(ref, *registry[(ref.subject, ref.version)])
    assert asked == [("a", 1), ("b", 1)]
    assert walk.texts == {"a.proto": "A", "b.proto": "B"}


def test_the_walk_stops_past_its_bound() -> None:
    walk = ReferenceWalk([Reference(f"r{i}", f"s{i}", 1) for i in range(MAX_REFERENCES + 1)])
    for _ in range(MAX_REFERENCES):
        ref = walk.next()
        assert ref is not None
        walk.found(ref, "text", ())
    with pytest.raises(SchemaUnreadableError, match=f"more than {MAX_REFERENCES} references"):
        walk.next()


def test_a_version_list_is_sorted_and_bounded() -> None:
    assert version_list([3, 1, 2], "s") == [1, 2, 3]
    with pytest.raises(RegistryError, match="not a list of versions"):
        version_list([1, "2"], "s")
    with pytest.raises(RegistryError, match=f"more than {MAX_VERSIONS}"):
        version_list(list(range(MAX_VERSIONS + 1)), "s")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=15,
)
versions_like = st.fixed_dictionaries(
    {},
    optional={
        "version": json_values,
        "id": json_values,
        "schema": json_values,
        "schemaType": st.sampled_from(["AVRO", "PROTOBUF", "JSON", "XML"]) | json_values,
        "references": st.lists(
            st.fixed_dictionaries(
                {}, optional={"name": json_values, "subject": json_values, "version": json_values}
            ),
            max_size=3,
        )
        | json_values,
    },
)


@settings(max_examples=200, deadline=1000)
@given(found=versions_like | json_values)
def test_any_decoded_answer_is_a_version_or_one_line_registry_error(found: Any) -> None:
    try:
        version = subject_version_of(found, "s")
    except RegistryError as e:
        message = str(e)
    else:
        assert isinstance(version, SubjectVersion)
        assert type(version.id) is int
        assert isinstance(version.schema, str)
        assert all(isinstance(ref, Reference) for ref in version.references)
        return
    assert len(message.splitlines()) == 1
