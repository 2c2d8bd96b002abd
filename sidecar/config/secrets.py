"""Keeping secrets out of error messages: what may hold one, and how to quote it without its value."""

from __future__ import annotations

import re

from sidecar.config.model import SECRET_KEYS

_SECRET_WORDS = ("password", "token", "secret", "jaas")


def looks_secret(text: str) -> bool:
    """Whether ``text`` may hold a secret: it names a secret key or a word secrets go with, in any
    case and with ``.``, ``_`` or ``-`` between words (``SASL.PASSWORD x``, ``sasl_password:x``)."""
    folded = re.sub(r"[_\-]", ".", text.lower())
    return any(key in folded for key in SECRET_KEYS) or any(word in folded for word in _SECRET_WORDS)


def without_secret(item: str) -> str:
    """``item`` quoted for an error message; when it may hold a secret, only the words before its
    first space, ``:`` or ``=`` (a key, as the user typed it), never what follows."""
    if not looks_secret(item):
        return repr(item)
    key, *rest = re.split(r"[\s:=]", item.strip(), maxsplit=1)
    return f"{key!r} followed by a hidden value" if rest else repr(key)
