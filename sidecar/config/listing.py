"""``timesync-sidecar config``: every key, its default, what it accepts and what it means.

Three renderings of :func:`~sidecar.config.surface.key_docs`, nothing typed twice:

* ``table`` (the default): aligned plain columns when the output is not a terminal (pipes, files,
  ``grep``); on a terminal the same columns wrapped to its width by rich, when rich is installed
  (it comes with the ``bench`` extra; the sidecar does not depend on it for one command);
* ``markdown``: the key table of docs/sidecar.md. ``--update FILE`` rewrites the block between
  ``<!-- config:keys -->`` and ``<!-- /config:keys -->`` in FILE, and a test fails while the
  committed page differs from the model;
* ``json``: one object per key, with its ``TIMESYNC_*`` variable and JSON Schema, for tools.

Secrets are marked (``(secret)``): they are never shown, and belong in the environment.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, TextIO

from sidecar.config.surface import TEXT, KeyDoc, key_docs

EXIT_OK, EXIT_USAGE = 0, 2
COLUMNS = ("key", "default", "accepts", "meaning")
BLOCK = re.compile(r"(<!-- config:keys -->\n)(.*?)(<!-- /config:keys -->)", re.S)


def cells(doc: KeyDoc) -> tuple[str, str, str, str]:
    """A key's row in plain words."""
    default = "required" if doc.default is None else doc.default or "empty"
    accepts = ", ".join(doc.accepts) + (" (secret)" if doc.secret else "")
    return doc.key, default, accepts, plain_text(doc.meaning)


def plain_text(meaning: str) -> str:
    """A meaning without its Markdown code marks, for the terminal and JSON."""
    return meaning.replace("`", "")


#: The widest the accepts column grows before its alternatives go on to further lines.
ACCEPTS_WIDTH = 40


def plain(docs: Sequence[KeyDoc]) -> str:
    """Aligned columns, a key's row on one line and the meaning last, unwrapped (for grep and
    pipes); only a long list of alternatives continues on the lines below, indented."""
    rows = [COLUMNS, *(cells(d) for d in docs)]
    accepts = [_wrapped(row[2]) for row in rows]
    widths = [max(len(row[0]) for row in rows), max(len(row[1]) for row in rows)]
    widths.append(max(len(line) for lines in accepts for line in lines))
    out = []
    for row, (first, *more) in zip(rows, accepts, strict=True):
        out.append(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {first:<{widths[2]}}  {row[3]}".rstrip())
        out.extend(" " * (widths[0] + widths[1] + 4) + line for line in more)
    return "\n".join(out) + "\n"


def _wrapped(accepts: str) -> list[str]:
    """``accepts`` in lines of at most :data:`ACCEPTS_WIDTH`, broken after commas."""
    lines = [""]
    for alternative in accepts.split(", "):
        line = f"{lines[-1]}, {alternative}" if lines[-1] else alternative
        if len(line) > ACCEPTS_WIDTH and lines[-1]:
            lines[-1] += ","
            lines.append(alternative)
        else:
            lines[-1] = line
    return lines


def print_rich(docs: Sequence[KeyDoc], out: TextIO, width: int | None = None) -> None:
    """The table, wrapped to the terminal by rich."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(*COLUMNS, box=None, header_style="bold", pad_edge=False)
    for doc in docs:
        key, *rest = cells(doc)
        table.add_row(Text(key, style="bold"), *map(Text, rest))  # Text: "[/path]" is no markup
    Console(file=out, width=width, highlight=False).print(table)


def _code(text: str) -> str:
    return "`" + text.replace("|", "\\|") + "`"


def _meaning_markdown(meaning: str) -> str:
    """The meaning as written (code spans in backticks), with ``<``, ``>`` outside code spans and
    every ``|`` made safe for a Markdown table."""
    parts = meaning.split("`")
    for i in range(0, len(parts), 2):  # outside code spans
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts).replace("|", "\\|")


def markdown(docs: Sequence[KeyDoc]) -> str:
    """The Markdown key table: key, default, accepts, meaning."""
    lines = ["| key | default | accepts | meaning |", "|---|---|---|---|"]
    for doc in docs:
        default = "required" if doc.default is None else _code(doc.default) if doc.default else "empty"
        accepts = ", ".join(a if a == TEXT else _code(a) for a in doc.accepts)
        accepts += " (secret)" if doc.secret else ""
        lines.append(f"| {_code(doc.key)} | {default} | {accepts} | {_meaning_markdown(doc.meaning)} |")
    return "\n".join(lines) + "\n"


def as_json(docs: Sequence[KeyDoc]) -> str:
    rows = [
        {
            "key": d.key,
            "env": d.env,
            "required": d.required,
            "default": d.default,
            "accepts": list(d.accepts),
            "meaning": plain_text(d.meaning),
            "secret": d.secret,
            "schema": d.schema,
        }
        for d in docs
    ]
    return json.dumps(rows, indent=2, ensure_ascii=False) + "\n"


def with_table(text: str, table: str) -> str | None:
    """``text`` with its ``config:keys`` block holding ``table``; ``None`` without the markers."""
    if BLOCK.search(text) is None:
        return None
    return BLOCK.sub(lambda m: m.group(1) + table + m.group(3), text, count=1)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"timesync-sidecar config: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="timesync-sidecar config",
        description="Every config key of the sidecar: its default, what it accepts and what it means. "
        "Set a key in the --config file, as TIMESYNC_<KEY> (upper snake case) or with --set key=value.",
    )
    parser.add_argument("keys", nargs="*", metavar="KEY", help="only these keys, or the keys under a prefix")
    parser.add_argument("--format", "-f", choices=["table", "markdown", "json"], default="table")
    parser.add_argument(
        "--update",
        metavar="FILE",
        help="with --format markdown: rewrite the table between <!-- config:keys --> and "
        "<!-- /config:keys --> in FILE",
    )
    return parser


def chosen(docs: Sequence[KeyDoc], wanted: Sequence[str]) -> list[KeyDoc]:
    """The keys named, or under a prefix named (``watermark`` gives ``watermark.*``); ``ValueError``
    naming a word that is neither, with the closest key."""
    out: list[KeyDoc] = []
    for word in wanted:
        prefix = word.rstrip(".") + "."
        found = [d for d in docs if d.key == word or d.key.startswith(prefix)]
        if not found:
            names = {d.key for d in docs} | {d.key.split(".")[0] for d in docs}
            hint = difflib.get_close_matches(word, sorted(names), n=1, cutoff=0.75)
            raise ValueError(f"no key {word!r}{f'; did you mean {hint[0]}?' if hint else ''}")
        out.extend(d for d in found if d not in out)
    return out


def main(argv: Sequence[str], out: TextIO | None = None) -> int:
    out = sys.stdout if out is None else out
    args = build_parser().parse_args(argv)
    try:
        docs = chosen(key_docs(), args.keys) if args.keys else list(key_docs())
    except ValueError as e:
        return _usage(str(e))
    if args.update:
        return _update(Path(args.update), args.format, docs, out)
    if args.format == "markdown":
        out.write(markdown(docs))
    elif args.format == "json":
        out.write(as_json(docs))
    elif out.isatty() and _has_rich():
        print_rich(docs, out)
    else:
        out.write(plain(docs))
    return EXIT_OK


def _update(path: Path, form: str, docs: Sequence[KeyDoc], out: TextIO) -> int:
    """Rewrite the key table of ``path`` (exit 2, one line, when it cannot)."""
    if form != "markdown" or len(docs) != len(key_docs()):
        return _usage("--update writes the whole table: give --format markdown and no KEY")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        return _usage(f"cannot read {str(path)!r}: {e.strerror}")
    updated = with_table(text, markdown(docs))
    if updated is None:
        return _usage(f"{str(path)!r} has no <!-- config:keys --> block to rewrite")
    if updated != text:
        path.write_text(updated, encoding="utf-8")
    out.write(f"{path}: {'updated' if updated != text else 'up to date'}\n")
    return EXIT_OK


def _usage(message: str) -> int:
    print(f"timesync-sidecar config: {message}", file=sys.stderr)
    return EXIT_USAGE


def _has_rich() -> bool:
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True
