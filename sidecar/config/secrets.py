"""Keeping secrets out of error messages: what may hold one, and how to quote it without its value.

A config error is printed, logged by whatever runs the sidecar, and pasted into tickets, so it
must not repeat anything that could be a secret. What a message may quote:

* a **key** when it is one of the sidecar's keys, close to one (a typo) or a dotted name: key
  names are not secrets. A single word like no key may be a misplaced value (a password on a
  line of its own in a ``.properties`` file, ``alice:s3cret`` read as key ``alice``, ``--set
  hunter2``), so it is not quoted; the message names where it is (the file's line);
* a **value** only when its key is not secret and the value does not look like a secret itself
  (:func:`looks_secret`); a URL without its user information and query (:func:`shown_value`);
* of a malformed ``--set`` item, only its first word, under the same rule as a key; never what
  follows it.

Environment variable *names* are quoted (a name is not a value); their values follow the rule
for values.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from sidecar.config.model import KEYS, SECRET_KEYS
from sidecar.config.registry_url import shown_url

#: Words secrets go with, in keys and in values (``pass`` covers ``passwd`` and ``password``).
_SECRET_WORDS = (
    "pass",
    "pwd",
    "token",
    "secret",
    "jaas",
    "user.info",
    "userinfo",
    "credential",
    "bearer",
    "apikey",
    "api.key",
    "private",
)
#: How close a word must be to a known key to be quoted as a mistyped key.
_KEY_LIKENESS = 0.75
HIDDEN = "(hidden: it may hold a secret)"


def looks_secret(text: str) -> bool:
    """Whether ``text`` may hold a secret: it names a secret key or a word secrets go with, in any
    case and with ``.``, ``_`` or ``-`` between words (``SASL.PASSWORD x``, ``sasl_password:x``)."""
    folded = re.sub(r"[_\-]", ".", text.lower())
    return any(key in folded for key in SECRET_KEYS) or any(word in folded for word in _SECRET_WORDS)


def close_key(word: str) -> str | None:
    """The sidecar's key ``word`` is, or is a typo of (``None``: like no key)."""
    folded = re.sub(r"[_\-\s]", ".", word.strip().lower())
    if folded in KEYS:
        return folded
    hint = difflib.get_close_matches(folded, KEYS, n=1, cutoff=_KEY_LIKENESS)
    return hint[0] if hint else None


def shown_key(word: str) -> str | None:
    """``word``, met where a key belongs, quoted for a message when it is like a key: one of the
    sidecar's keys, a typo of one, or a dotted name. ``None`` for a single word like no key: it
    may be a value in a key's place (``alice:s3cret`` read as key ``alice``)."""
    word = word.strip()
    if not word or (close_key(word) is None and "." not in word):
        return None
    return repr(word)


def without_secret(item: str) -> str:
    """A malformed ``--set`` item (no ``=``) quoted for a message: its first word (before a space
    or ``:``) under the rule of :func:`shown_key`, never what follows it."""
    first, *rest = re.split(r"[\s:=]", item.strip(), maxsplit=1)
    shown = shown_key(first)
    if shown is None:
        return "an item that is not shown (its first word is like no key, so it may be a value)"
    return f"{shown} followed by a hidden value" if rest else shown


def shown_value(key: str, raw: Any) -> str:
    """The value of ``key`` as an error message may show it."""
    if key in SECRET_KEYS:
        return "********"
    text = str(raw)
    if key.endswith(".url"):
        return repr(shown_url(text))
    if looks_secret(text):
        return HIDDEN
    return repr(raw)


def without_values(message: str) -> str:
    """An ``argparse`` error without the values it quotes: ``unrecognized arguments: --sett
    x=secret`` and ``alice:s3cret`` (a ``--set`` item split by the shell) name only the options,
    and an invalid choice is repeated only when it is a plain word."""
    head, sep, rest = message.partition("unrecognized arguments: ")
    if sep:
        words = rest.split()
        options = [w.split("=", 1)[0] for w in words if w.startswith("-")]
        hidden = len(words) - len(options)
        shown = " ".join(options)
        if hidden:
            shown += f"{' and ' if shown else ''}{hidden} more word{'s' if hidden > 1 else ''} (not shown)"
        message = head + sep + shown
    # An invalid choice is shown when it is a plain word (a mistyped enum, 'TLS'), else cut.
    message = re.sub(
        r"invalid choice: (?!'[\w.-]{1,32}' \()(.*) \(choose from", "invalid choice (choose from", message
    )
    return re.sub(r"(--?[\w.-]+)=\S*", r"\1=...", message)
