"""Fuzzing the config loader: any key, value, variable or file gives a config or one clear line.

The CLI turns a :class:`ConfigError` into exit 2 with its message; anything else would be a
traceback. So for arbitrary input the loader either returns a config or raises ``ConfigError``
with a one-line message, quickly, and a secret given to it never shows up in that message.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.config import ENV_NAMES, KEYS, ConfigError, SidecarConfig, load_config

FUZZ = settings(max_examples=200, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
REQUIRED = ["bootstrap.servers=h:1", "input.topics=a", "output.topic=o"]

keys = st.one_of(st.sampled_from(sorted(KEYS)), st.text(max_size=30))
values = st.one_of(
    st.text(max_size=30),
    st.integers().map(str),
    st.sampled_from(["", "max", "-1", "true", "all", "none", "json:ts", "topic:x", "SASL_SSL", "1e9"]),
)
env_names = st.one_of(
    st.sampled_from(sorted(ENV_NAMES)),
    st.text(max_size=20).map(lambda s: "TIMESYNC_" + s),
    st.sampled_from(["TIMESYNC_SPARK_JARS_DIR", "PATH", "timesync_linger_ms"]),
)
# Whatever os.environ can hold: no NUL anywhere, no "=" in a name.
environments = st.dictionaries(
    env_names.filter(lambda n: "\x00" not in n and "=" not in n and n),
    values.filter(lambda v: "\x00" not in v),
    max_size=4,
)
sets = st.lists(st.one_of(st.builds("{}={}".format, keys, values), st.text(max_size=30)), max_size=5)


def outcome(path: Path | None, items: list[str], env: dict[str, str]) -> SidecarConfig | str:
    """The config, or the error message after checking it is one line."""
    try:
        return load_config(path, items, env)
    except ConfigError as e:
        message = str(e)
    assert message.startswith("config error: ")
    assert len(message.splitlines()) == 1, message
    return message


@FUZZ
@given(items=sets, env=environments)
def test_any_set_and_environment_give_a_config_or_one_line(items: list[str], env: dict[str, str]) -> None:
    outcome(None, REQUIRED + items, env)


@FUZZ
@given(settings_=st.dictionaries(st.sampled_from(sorted(KEYS)), values, max_size=8))
def test_any_values_for_known_keys_give_a_config_or_one_line(settings_: dict[str, str]) -> None:
    result = outcome(None, REQUIRED + [f"{k}={v}" for k, v in settings_.items()], {})
    if isinstance(result, SidecarConfig):
        assert result.redacted()["bootstrap.servers"] == settings_.get("bootstrap.servers", "h:1").strip()


yaml_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20))
yaml_documents = st.recursive(
    yaml_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(keys, children, max_size=4),
    max_leaves=12,
)


@FUZZ
@given(
    text=st.one_of(
        st.text(max_size=300),
        st.lists(st.builds("{}{}{}".format, keys, st.sampled_from(["=", ":", " ", "\t", ""]), values)).map(
            "\n".join
        ),
    ),
    suffix=st.sampled_from([".properties", ".yaml", ".yml", ".conf"]),
)
def test_any_text_file_gives_a_config_or_one_line(text: str, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"c{suffix}"
        path.write_text(text, errors="surrogatepass")
        outcome(path, REQUIRED, {})


@FUZZ
@given(document=yaml_documents)
def test_any_yaml_document_gives_a_config_or_one_line(document: object) -> None:
    import yaml

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "c.yaml"
        path.write_text(yaml.safe_dump(document))
        outcome(path, REQUIRED, {})


@FUZZ
@given(data=st.binary(max_size=300), suffix=st.sampled_from([".properties", ".yaml"]))
def test_any_bytes_file_gives_a_config_or_one_line(data: bytes, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"c{suffix}"
        path.write_bytes(data)
        outcome(path, REQUIRED, {})


@FUZZ
@given(
    secret=st.from_regex(r"\Azq-secret-[A-Za-z0-9]{8}\Z"),
    key=st.sampled_from(["sasl.password", "ssl.password"]),
    how=st.sampled_from(["set", "env", "properties", "yaml", "set-typo"]),
    others=st.lists(st.builds("{}={}".format, keys, values), max_size=4),
)
def test_a_secret_never_appears_in_an_error_or_in_redacted(
    secret: str, key: str, how: str, others: list[str]
) -> None:
    env: dict[str, str] = {}
    items = REQUIRED + others
    with tempfile.TemporaryDirectory() as folder:
        path: Path | None = None
        if how == "set":
            items.insert(0, f"{key}={secret}")
        elif how == "set-typo":
            items.insert(0, f"{key}:{secret}")
        elif how == "env":
            env["TIMESYNC_" + key.upper().replace(".", "_")] = secret
        elif how == "properties":
            path = Path(folder) / "c.properties"
            path.write_text(f"{key} {secret}\n")
        else:
            path = Path(folder) / "c.yaml"
            path.write_text(f"{key}: {secret}\n")
        result = outcome(path, items, env)
    shown = str(result.redacted()) if isinstance(result, SidecarConfig) else result
    assert secret not in shown
