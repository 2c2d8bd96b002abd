"""The registry URL rules, written once (``timesync_wire/registry/urls.py``) and applied by both
halves, each naming its own settings: no rule repeats the user information or the query of a URL,
whatever the text; and the argparse messages of both command lines are cut the same way."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.config.model import REGISTRY_NAMES as SIDECAR
from sidecar.config.secrets import without_values as sidecar_without_values
from spark_consumer.common_options import without_values as spark_without_values
from spark_consumer.schema_registry import BASIC_AUTH_ENV
from spark_consumer.schema_registry import REGISTRY_NAMES as SPARK
from timesync_wire.registry.urls import credentials_problem, shown_url, url_problem

URLS = [
    "https://registry:8081/apis/ccompat/v7",
    "http://127.0.0.1:8081",
    "http://localhost:8081/x",
    "http://[::1]:8081",
    "http://10.1.2.3:8081",
    "http://registry.example",
    "https://u:p@registry:8081",
    "https://u@registry",
    "u:p@registry:8081",
    "registry:8081",
    "ftp://registry",
    "http://registry/x?token=1",
    "http://registry/x#f",
    "http://[::1",
    "http://registry:99999",
    "http://",
    "",
]
url_text = st.one_of(
    st.sampled_from(URLS),
    st.builds(
        "{}://{}{}{}{}".format,
        st.sampled_from(["http", "https", "ftp", ""]),
        st.sampled_from(["", "u:p@", "u@"]),
        st.sampled_from(["registry", "127.0.0.1", "[::1]", "localhost", "10.0.0.1", "[::1"]),
        st.sampled_from(["", ":8081", ":0", ":x"]),
        st.sampled_from(["", "/apis", "/a?b=c", "/#x", "/?token=1"]),
    ),
    st.text(max_size=30),
)


@settings(max_examples=300, deadline=1000)
@given(url=url_text, credentials=st.booleans(), cafile=st.booleans())
def test_no_rule_and_no_shown_url_repeats_user_information_or_a_query(
    url: str, credentials: bool, cafile: bool
) -> None:
    said = [shown_url(url)]
    for names in (SIDECAR, SPARK):
        problem = url_problem(url, names)
        if problem is None and url:
            problem = credentials_problem(url, "credentials" if credentials else None, cafile, names)
        said.append(problem or "")
    for written, secret in (("u:p@", "u:p"), ("?b=c", "b=c"), ("?token=1", "token=1")):
        if written in url:
            assert not any(secret in text for text in said), (url, said)


@pytest.mark.parametrize(
    ("url", "credentials", "cafile", "sidecar_says", "spark_says"),
    [
        (
            "https://u:p@registry",
            None,
            False,
            "set schema.registry.basic.auth.user.info",
            f"set ${BASIC_AUTH_ENV}",
        ),
        (
            "http://registry",
            None,
            True,
            "schema.registry.ssl.cafile is set",
            "--schema-registry-ssl-cafile is set",
        ),
        ("http://registry", "the secret", False, "but schema.registry.url", "but --schema-registry-url"),
    ],
)
def test_each_half_names_its_own_settings(
    url: str, credentials: str | None, cafile: bool, sidecar_says: str, spark_says: str
) -> None:
    for names, says in ((SIDECAR, sidecar_says), (SPARK, spark_says)):
        problem = url_problem(url, names) or credentials_problem(url, credentials, cafile, names)
        assert problem is not None
        assert says in problem


@pytest.mark.parametrize(
    "message",
    [
        "unrecognized arguments: --sett x=secret alice:pw",
        "ambiguous option: --schema-registry-basic-auth-user=alice:pw could match --a, --b",
        "argument --sink: invalid choice: 'alice:hunter2' (choose from 'kafka', 'console')",
        "argument --security-protocol: invalid choice: 'TLS' (choose from 'SSL')",
        "the following arguments are required: --topic",
    ],
)
def test_both_command_lines_cut_argparse_messages_the_same_way(message: str) -> None:
    assert sidecar_without_values(message) == spark_without_values(message)
    assert "secret" not in sidecar_without_values(message)
    assert "alice" not in sidecar_without_values(message)
    assert "hunter2" not in sidecar_without_values(message)
    assert "TLS" in sidecar_without_values(message) or "TLS" not in message, "a plain word is shown"
