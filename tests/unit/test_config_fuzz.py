"""Fuzzing the config loader: any key, value, variable or file gives a config or one clear line.

The CLI turns a :class:`ConfigError` into exit 2 with its message; anything else would be a
traceback. So for arbitrary input the loader either returns a config or raises ``ConfigError``
with a one-line message, quickly, and a secret given to it never shows up in that message.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar import cli
from sidecar.config import ENV_NAMES, KEYS, SECRET_KEYS, ConfigError, SidecarConfig, load_config

FUZZ = settings(
    max_examples=200,
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
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


#: Every way a secret reaches the loader, right or wrong: each secret key from each source, typed
#: with a space or ":" for "=", under a misspelt key, on a line of its own, as a URL's user
#: information, after the key forgotten (issue 32, item 10).
HOW = (
    "set",
    "env",
    "properties",
    "yaml",
    "set-typo",
    "set-misspelt",
    "set-keyless",
    "properties-lone",
    "properties-continued",
    "url",
    "url-env",
    "argv-split",
)


def placed(how: str, key: str, secret: str, folder: str) -> tuple[list[str], dict[str, str], Path | None]:
    """(--set items, environment, file) that give ``secret`` to the loader the way ``how`` says."""
    misspelt = key.replace("user.info", "userinfo").replace("password", "pasword").replace("token", "tokn")
    items: list[str] = []
    env: dict[str, str] = {}
    path: Path | None = None
    lines = {
        "properties": f"{key} {secret}\n",
        "properties-lone": f"{key}=x\n{secret}\n",
        "properties-continued": f"{key}=\\\nuser:{secret}\n",
        "yaml": f"{key}: {secret}\n",
    }
    if how in lines:
        path = Path(folder) / ("c.yaml" if how == "yaml" else "c.properties")
        path.write_text(lines[how])
    elif how == "env":
        env["TIMESYNC_" + key.upper().replace(".", "_")] = secret
    elif how == "url-env":
        env["TIMESYNC_SCHEMA_REGISTRY_URL"] = f"https://user:{secret}@h/x"
    else:
        items.append(
            {
                "set": f"{key}={secret}",
                "set-typo": f"{key}:{secret}",
                "set-misspelt": f"{misspelt} user:{secret}",
                "set-keyless": f"user:{secret}",
                "url": f"schema.registry.url=http://user:{secret}@h:8081",
                "argv-split": secret,
            }.get(how, "")
        )
    return items, env, path


@FUZZ
@given(
    # Secrets that look like nothing in particular: the rules must hold without the word "secret".
    secret=st.from_regex(r"\Azq[A-Za-z0-9]{10}\Z"),
    key=st.sampled_from(sorted(SECRET_KEYS)),
    how=st.sampled_from(HOW),
    others=st.lists(st.builds("{}={}".format, keys, values), max_size=4),
)
def test_a_secret_never_appears_in_an_error_or_in_redacted(
    secret: str, key: str, how: str, others: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        items, env, path = placed(how, key, secret, folder)
        if how == "argv-split":  # --set KEY SECRET unquoted: the shell splits it
            argv = ["--set", key, secret, *(a for item in others for a in ("--set", item))]
            with pytest.raises(SystemExit):
                cli.main(argv)
            shown = capsys.readouterr().err
        else:
            result = outcome(path, items + REQUIRED + others, env)
            shown = str(result.redacted()) if isinstance(result, SidecarConfig) else result
    assert secret not in shown
