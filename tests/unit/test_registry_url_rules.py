"""The registry URL rules live twice — the sidecar's config (``sidecar/config/registry_url.py``)
and the Spark job (``spark_consumer/schema_registry.py``), as the Spark half never imports the
sidecar — so this test holds the two equal: the same URLs refused, the same URLs shown the same
way, the same argparse messages cut the same way."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.config import registry_url as sidecar_rules
from sidecar.config.secrets import without_values as sidecar_without_values
from spark_consumer import schema_registry as spark_rules
from spark_consumer.common_options import without_values as spark_without_values

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
        st.sampled_from(["", "/apis", "/a?b=c", "/#x"]),
    ),
    st.text(max_size=30),
)


@settings(max_examples=300, deadline=1000)
@given(url=url_text, credentials=st.booleans(), cafile=st.booleans())
def test_both_halves_refuse_and_show_the_same_urls(url: str, credentials: bool, cafile: bool) -> None:
    assert sidecar_rules.shown_url(url) == spark_rules.shown_url(url)
    refused_url = sidecar_rules.url_problem(url) is not None
    assert refused_url == (spark_rules.url_problem(url) is not None)
    if refused_url or not url:
        return
    who = "credentials" if credentials else None
    sidecar_refused = sidecar_rules.credentials_problem(url, who, cafile) is not None
    assert sidecar_refused == (spark_rules.credentials_problem(url, who, cafile) is not None)


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
