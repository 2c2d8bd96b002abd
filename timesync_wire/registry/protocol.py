"""Confluent's Schema Registry API as requests to build and answers to read, without I/O.

Both halves ask a registry the same few things — a schema by id (the sidecar, for the ids its
records carry), a subject's versions and one version (the Spark jobs, at plan time), and the
subject versions a schema references (both) — over their own transports (aiohttp, urllib). What
to ask is written here: the paths (:func:`schema_by_id`, :func:`subject_versions`,
:func:`subject_version`), what a version's answer holds (:func:`version_list`,
:func:`subject_version_of`, after :func:`~.answers.interpret` decoded it), and the walk through
references (:class:`ReferenceWalk`), which a transport drives by fetching what it asks for.

Every answer is read defensively (a registry is a network peer): a shape that is not the API's
is a :class:`~.answers.RegistryUnavailableError` naming what was asked, never a ``KeyError``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from timesync_wire.registry.answers import (
    MAX_REFERENCES,
    Reference,
    RegistryUnavailableError,
    SchemaUnreadableError,
    reference_list,
    schema_text,
)

#: The most versions of one subject read (one request each); Confluent's default cap is 1,000.
MAX_VERSIONS = 10_000


def schema_by_id(schema_id: int) -> str:
    """The path of the schema with a global id (its text, type and references)."""
    return f"/schemas/ids/{schema_id}"


def subject_versions(subject: str) -> str:
    """The path of a subject's version numbers."""
    return f"/subjects/{quote(subject, safe='')}/versions"


def subject_version(subject: str, version: int | Literal["latest"]) -> str:
    """The path of one version of a subject (its id, type, text and references)."""
    return f"{subject_versions(subject)}/{version}"


@dataclass(frozen=True, slots=True)
class SubjectVersion:
    """One registered version of a subject: its global id, its schema type and text, and the
    schemas it references."""

    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()


def version_list(body: Any, subject: str) -> list[int]:
    """A subject's version numbers from a decoded answer, oldest first; at most MAX_VERSIONS."""
    what = f"the versions of subject {subject!r}"
    if not isinstance(body, list) or not all(type(v) is int for v in body):
        raise RegistryUnavailableError(f"the registry's answer for {what} is not a list of versions")
    if len(body) > MAX_VERSIONS:
        raise SchemaUnreadableError(f"subject {subject!r} has {len(body)} versions, more than {MAX_VERSIONS}")
    return sorted(body)


def subject_version_of(body: Any, subject: str) -> SubjectVersion:
    """One version of ``subject`` from a decoded answer (Confluent's API omits ``schemaType``
    for Avro)."""
    what = f"a version of subject {subject!r}"
    text, kind = schema_text(body, what)
    version, schema_id = body.get("version"), body.get("id")
    if type(version) is not int or type(schema_id) is not int:
        raise RegistryUnavailableError(f"the registry's answer for {what} lacks an integer version and id")
    return SubjectVersion(subject, version, schema_id, kind, text, reference_list(body, what))


class ReferenceWalk:
    """The texts of the schemas a schema references, and of theirs in turn, by import name.

    The transport drives it: ``while (ref := walk.next()) is not None``, fetch that subject
    version and hand its text and references to :meth:`found`; :attr:`texts` is then complete.
    A worklist, not recursion; each subject version is fetched once (a cycle is followed once),
    and past MAX_REFERENCES subject versions in all the schema is unreadable.
    """

    def __init__(self, references: Iterable[Reference]) -> None:
        #: Import name → text: a Protobuf reference by its import, an Avro one by the full name
        #: of the type it defines.
        self.texts: dict[str, str] = {}
        self._pending = list(references)
        self._seen: set[tuple[str, int]] = set()

    def next(self) -> Reference | None:
        """The next subject version to fetch, or ``None`` when every one is known."""
        while self._pending:
            ref = self._pending.pop()
            if (ref.subject, ref.version) in self._seen:
                continue
            self._seen.add((ref.subject, ref.version))
            if len(self._seen) > MAX_REFERENCES:
                raise SchemaUnreadableError(f"the schema has more than {MAX_REFERENCES} references")
            return ref
        return None

    def found(self, ref: Reference, text: str, references: Iterable[Reference]) -> None:
        """What the registry gave for ``ref``: its text and its own references."""
        self.texts[ref.name] = text
        self._pending.extend(references)
