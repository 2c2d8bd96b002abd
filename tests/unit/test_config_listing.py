"""``timesync-sidecar config`` lists every key with its default, what it accepts and its meaning;
``timesync-sidecar --help`` is plain help that names no key and points there."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from sidecar.cli import build_parser
from sidecar.cli import main as sidecar_main
from sidecar.config import ENV_NAMES, KEYS, SECRET_KEYS
from sidecar.config.listing import main as config_main
from sidecar.config.listing import markdown, print_rich, with_table
from sidecar.config.surface import key_docs


def listing(*argv: str) -> str:
    out = io.StringIO()
    assert config_main(list(argv), out) == 0
    return out.getvalue()


def rows(text: str) -> dict[str, list[str]]:
    """The plain table's rows by key: its cells split on runs of two spaces."""
    out = {}
    for line in text.splitlines()[1:]:
        if not line.startswith(" "):
            key, *cells = line.split("  ")
            out[key] = [c.strip() for c in cells if c.strip()]
    return out


def test_help_names_no_key_and_points_to_the_config_listing() -> None:
    text = build_parser().format_help()
    assert "timesync-sidecar config" in text
    assert "``" not in text, "no reStructuredText in a terminal"
    assert [k for k in KEYS if k in text] == []
    assert "offsets reset" in text


def test_the_listing_has_every_key_once_in_the_models_order() -> None:
    assert list(rows(listing())) == list(KEYS)


def test_a_row_says_the_default_what_is_accepted_and_the_meaning() -> None:
    default, accepts, meaning = rows(listing())["max.task.idle.ms"]
    assert (default, accepts) == ("0", "-1, 0, N, max, auto")
    assert "auto: learnt per partition" in meaning
    assert rows(listing())["bootstrap.servers"][0] == "required"
    assert rows(listing())["group.id"][:2] == ["empty", "text"]


def test_every_extractor_form_is_listed() -> None:
    text = listing("timestamp.extractor")
    for form in ("record", "json:<dotted.path>[:", "avro:<dotted.path>[:", "protobuf:<dotted.path>[:"):
        assert form in text


def test_secrets_are_marked_and_no_value_is_shown() -> None:
    table = rows(listing())
    for key in SECRET_KEYS:
        assert table[key][0] == "empty"
        assert table[key][1].endswith("(secret)"), key
    assert sum("(secret)" in line for line in listing().splitlines()) == len(SECRET_KEYS)


def test_meanings_are_plain_text_in_a_terminal() -> None:
    assert "`" not in listing()


def test_keys_and_prefixes_choose_rows() -> None:
    assert list(rows(listing("watermark", "linger.ms"))) == [
        *(k for k in KEYS if k.startswith("watermark.")),
        "linger.ms",
    ]


def test_an_unknown_key_is_one_line_with_a_hint_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert config_main(["watermak"], io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err == "timesync-sidecar config: no key 'watermak'; did you mean watermark?\n"


def test_json_gives_each_key_its_variable_default_and_schema() -> None:
    docs = json.loads(listing("--format", "json"))
    assert [d["key"] for d in docs] == list(KEYS)
    assert {d["env"]: KEYS[d["key"]] for d in docs} == ENV_NAMES
    idle = next(d for d in docs if d["key"] == "max.task.idle.ms")
    assert idle["default"] == "0"
    assert idle["accepts"] == ["-1", "0", "N", "max", "auto"]
    assert {"max", "auto"} <= set(idle["schema"]["anyOf"][1]["enum"])
    assert next(d for d in docs if d["key"] == "output.topic")["required"] is True


def test_markdown_is_one_table_row_per_key_with_pipes_escaped() -> None:
    text = markdown(key_docs())
    lines = text.splitlines()
    assert lines[0] == "| key | default | accepts | meaning |"
    assert len(lines) == 2 + len(KEYS)
    extractor = next(line for line in lines if line.startswith("| `timestamp.extractor` |"))
    assert "`json:<dotted.path>[:ms\\|s\\|iso]`" in extractor
    assert extractor.count(" | ") == 3, "no unescaped pipe splits a cell"
    group = next(line for line in lines if line.startswith("| `group.id` |"))
    assert "`timesync-<output.topic>`" in group, "code spans of the docstring kept"


def test_update_rewrites_only_the_marked_block(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Keys\n\n<!-- config:keys -->\nstale\n<!-- /config:keys -->\n\nAfter.\n")
    assert listing("--format", "markdown", "--update", str(page)) == f"{page}: updated\n"
    assert (
        page.read_text()
        == f"# Keys\n\n<!-- config:keys -->\n{markdown(key_docs())}<!-- /config:keys -->\n\nAfter.\n"
    )
    assert listing("--format", "markdown", "--update", str(page)) == f"{page}: up to date\n"


def test_update_refuses_a_page_without_the_block(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "page.md"
    page.write_text("no block here\n")
    assert config_main(["--format", "markdown", "--update", str(page)], io.StringIO()) == 2
    assert "has no <!-- config:keys --> block" in capsys.readouterr().err
    assert with_table("no block", "x") is None


def test_on_a_terminal_rich_wraps_the_table_to_its_width() -> None:
    out = io.StringIO()
    print_rich(key_docs(), out, width=100)
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 100
    assert all(key in text for key in ("bootstrap.servers", "max.task.idle.ms", "schema.registry.url"))


def test_the_sidecar_command_runs_the_listing(capsys: pytest.CaptureFixture[str]) -> None:
    assert sidecar_main(["config", "linger.ms"]) == 0
    assert list(rows(capsys.readouterr().out)) == ["linger.ms"]
