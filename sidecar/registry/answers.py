"""What a Schema Registry's answer means: pure, total, and fuzzed (no I/O here).

The registry's answers are bytes we do not control (a proxy's error page, a truncated body, JSON
nested without end, a schema type that is a number). :func:`interpret` turns any of them into
exactly one of four outcomes, and never raises anything else:

========================  =======================================  ===============================
answer                    outcome                                  what the sidecar does
========================  =======================================  ===============================
200, a JSON object        the object (then :func:`schema_text`,    compile it
                          :func:`reference_list` check its shape)
404, 410                  :class:`SchemaNotFoundError`             invalid timestamps, asked again
                                                                   after the missing-id TTL
400, 422; a 200 larger    :class:`SchemaUnreadableError`           invalid timestamps, asked again
than MAX_ANSWER_BYTES                                              after a while
401, 403                  :class:`RegistryRefusedError`            fatal: another try is refused too
429, 3xx, 5xx, any other  :class:`RegistryUnavailableError`        wait (honouring Retry-After, at
status; a 200 that is not                                          most MAX_RETRY_AFTER_S), never
a JSON object of the API                                           dead-letter; unhealthy past
                                                                   schema.registry.unhealthy.after.ms
========================  =======================================  ===============================

A redirect is not followed (the credentials go to ``schema.registry.url`` only): its reason says
where it pointed, without user information or query. Every reason is one line of printable text,
the registry's own words cut to MAX_DETAIL characters.
"""

from __future__ import annotations

import email.utils
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from sidecar.config.registry_url import shown_url

#: The most of one answer that is read; a schema larger than this is refused, not buffered.
MAX_ANSWER_BYTES = 4 * 1024 * 1024
#: References of one schema, all levels together.
MAX_REFERENCES = 256
#: The longest wait a Retry-After may ask for; longer asks are cut to it.
MAX_RETRY_AFTER_S = 60.0
#: The registry's own words kept in a reason.
MAX_DETAIL = 200


class RegistryError(Exception):
    """A registry answer that gives no schema."""


class RegistryUnavailableError(RegistryError):
    """Unreachable, timed out, rate-limited, redirected, 5xx or garbled: ask again later (not
    before ``retry_after_s`` when the registry said so)."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class RegistryRefusedError(RegistryError):
    """401/403: the registry refuses the credentials (``schema.registry.*auth*``)."""


class SchemaUnreadableError(RegistryError):
    """The registry's answer says this id gives no schema the sidecar can use (cached a while)."""


class SchemaNotFoundError(SchemaUnreadableError):
    """404 for a schema id or a referenced subject version."""


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """A schema as the registry gives it: text, type and the texts of its references by import
    name (resolved recursively)."""

    text: str
    schema_type: str = "AVRO"
    references: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Answer:
    """One HTTP answer as read: status, body (at most MAX_ANSWER_BYTES), whether that is all of
    it, and the ``Retry-After`` and ``Location`` headers."""

    status: int
    body: bytes
    complete: bool = True
    retry_after: str | None = None
    location: str | None = None


def interpret(answer: Answer, what: str, where: str, now: float, secrets: tuple[str, ...] = ()) -> Any:
    """The decoded JSON object of a 200 answer for ``what`` (``schema id 7``), asked of ``where``
    (the URL as shown); else the :class:`RegistryError` the table of the module says. ``now``:
    wall-clock seconds (for a Retry-After date); ``secrets`` are never repeated in a reason."""
    status = answer.status
    if status == 200:
        if not answer.complete:
            raise SchemaUnreadableError(
                f"the registry's answer for {what} is larger than {MAX_ANSWER_BYTES} bytes"
            )
        try:
            body = orjson.loads(answer.body)
        except (ValueError, RecursionError):
            body = None
        if not isinstance(body, dict):
            raise RegistryUnavailableError(f"{where} answered 200 for {what} with no JSON object")
        return body
    said = detail(answer.body, secrets)
    if status in (404, 410):
        raise SchemaNotFoundError(f"the registry does not know {what} ({status})")
    if status in (401, 403):
        raise RegistryRefusedError(
            f"the schema registry at {where} refused the credentials ({status}){said}; "
            "check schema.registry.basic.auth.user.info or schema.registry.bearer.auth.token"
        )
    if status in (400, 422):
        raise SchemaUnreadableError(f"the registry refused the request for {what} ({status}){said}")
    wait = retry_after(answer.retry_after, now)
    if 300 <= status < 400:
        target = shown_url(answer.location or "") or "nowhere"
        raise RegistryUnavailableError(
            f"{where} redirected the request for {what} to {_printable(target)} ({status}); redirects "
            "are not followed (the credentials go to schema.registry.url only): set "
            "schema.registry.url to the address that answers",
            wait,
        )
    if status == 429:
        raise RegistryUnavailableError(f"{where} is rate-limiting requests (429){said}", wait)
    raise RegistryUnavailableError(f"{where} answered {status} for {what}{said}", wait)


def schema_text(body: Any, what: str) -> tuple[str, str]:
    """The schema text and type (``AVRO`` when absent, as Confluent's API omits it) of a decoded
    answer; :class:`RegistryUnavailableError` when the answer is not the API's shape."""
    text = body.get("schema") if isinstance(body, dict) else None
    kind = body.get("schemaType") if isinstance(body, dict) else None
    if not isinstance(text, str) or not isinstance(kind, str | None):
        raise RegistryUnavailableError(f"the registry's answer for {what} has no schema text and type")
    return text, _printable(kind or "AVRO")[:40]


def reference_list(body: Any, what: str) -> tuple[tuple[str, str, int], ...]:
    """(import name, subject, version) of each reference a decoded answer lists."""
    refs = body.get("references") if isinstance(body, dict) else None
    if refs is None:
        return ()
    if not isinstance(refs, list):
        raise RegistryUnavailableError(f"the registry's answer for {what} has references that are not a list")
    if len(refs) > MAX_REFERENCES:
        raise SchemaUnreadableError(f"{what} has more than {MAX_REFERENCES} references")
    out = []
    for ref in refs:
        name = ref.get("name") if isinstance(ref, dict) else None
        subject = ref.get("subject") if isinstance(ref, dict) else None
        version = ref.get("version") if isinstance(ref, dict) else None
        if not (isinstance(name, str) and isinstance(subject, str) and type(version) is int):
            raise RegistryUnavailableError(
                f"the registry gave {what} a reference without name, subject and version"
            )
        out.append((name, subject, version))
    return tuple(out)


def retry_after(value: str | None, now: float) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta seconds or an HTTP date), within
    [0, MAX_RETRY_AFTER_S]; ``None`` when absent or not either form."""
    if not value:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        seconds = float(int(text[:12]))
    else:
        try:
            when = email.utils.parsedate_to_datetime(text)
            seconds = when.timestamp() - now
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def detail(body: bytes, secrets: tuple[str, ...] = ()) -> str:
    """``": <the registry's message>"``, one printable line of at most MAX_DETAIL characters
    (the ``message`` of a JSON error body, else the text), or ``""``."""
    head = body[: MAX_DETAIL * 8]
    text = head.decode("utf-8", "replace")
    try:
        decoded = orjson.loads(body) if len(body) <= 64 * 1024 else None
    except (ValueError, RecursionError):
        decoded = None
    if isinstance(decoded, dict) and isinstance(decoded.get("message"), str):
        text = decoded["message"]
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = _printable(" ".join(text.split()))[:MAX_DETAIL]
    return f": {text}" if text else ""


def _printable(text: str) -> str:
    """``text`` with control characters, line and paragraph separators and surrogates as ``?``."""
    return re.sub(r"[^\x20-\x7e\u00a0-\u2027\u202a-\ud7ff\ue000-\ufffd]", "?", text)
