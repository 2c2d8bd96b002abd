"""Read a subject's schemas from a Schema Registry, once, before Spark starts.

The jobs decode Avro and Protobuf values with the schemas the registry holds for the ordered
topic's subject (``<topic>-value`` unless ``--value-subject`` says otherwise). They are fetched
at plan time, through Confluent's REST API (``/subjects/<s>/versions``, ``/versions/<v>``),
which Confluent's registry serves at its root and Apicurio under ``/apis/ccompat/v7``: the URL
given is that base. Every version is read, not only the latest, because records written under
an older version carry its id and are decoded with it (see :mod:`spark_consumer.value_formats`).

The settings are named after the sidecar's (and Confluent's clients'): ``schema.registry.url``,
``schema.registry.basic.auth.user.info`` (``USER:PASSWORD``), ``schema.registry.bearer.auth.token``
and ``schema.registry.ssl.cafile``. Secrets never appear in an error or a ``repr``, and the URL
follows the rules both halves share (:mod:`timesync_wire.registry.urls`): no ``user:password@``
in it, no query, no CA file with ``http://``, no credentials over ``http://`` to a host other
than loopback.

This is the standard-library transport over the protocol both halves share
(:mod:`timesync_wire.registry`): the paths, the headers, what an answer means (the same table as
the sidecar's, :func:`~timesync_wire.registry.answers.interpret`), the shape of a version and the
walk through references. **Redirects are not followed**: urllib would send ``Authorization`` to
wherever a 3xx points, another host included. The credentials go to the configured origin only;
a redirect is a one-line error saying where it pointed. Each answer is read up to
:data:`~timesync_wire.registry.answers.MAX_ANSWER_BYTES`.

Anything that stops the fetch (no answer, a refusal, an unknown subject, a body that is not the
API's JSON) is a :class:`RegistryError`: one line, raised before Spark starts, exit status 2 like
every other mistake the CLI can see up front.
"""

from __future__ import annotations

import contextlib
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any, Literal

from spark_consumer.options import UsageError
from timesync_wire.registry import answers
from timesync_wire.registry.answers import MAX_ANSWER_BYTES, Answer, SchemaNotFoundError, interpret
from timesync_wire.registry.protocol import (
    ReferenceWalk,
    SubjectVersion,
    subject_version,
    subject_version_of,
    subject_versions,
    version_list,
)
from timesync_wire.registry.settings import RegistrySettings
from timesync_wire.registry.urls import SettingNames, credentials_problem, shown_url, url_problem

__all__ = ["RegistryClient", "RegistryError", "RegistrySettings", "SubjectVersion", "checked_settings"]

#: Where the registry's credentials come from: never the command line, where ``ps`` shows them.
BASIC_AUTH_ENV = "TIMESYNC_SPARK_SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO"
BEARER_TOKEN_ENV = "TIMESYNC_SPARK_SCHEMA_REGISTRY_BEARER_AUTH_TOKEN"
TIMEOUT_S = 10.0
#: How the registry's rules (:mod:`timesync_wire.registry`) name the jobs' options.
REGISTRY_NAMES = SettingNames(
    url="--schema-registry-url",
    cafile="--schema-registry-ssl-cafile",
    credentials_instead=f"${BASIC_AUTH_ENV} or --schema-registry-basic-auth-user-info-file",
    credentials=f"${BASIC_AUTH_ENV} or ${BEARER_TOKEN_ENV} (or their --schema-registry-*-file options)",
)


class RegistryError(UsageError):
    """The registry could not give a subject's schemas; the message says why, without secrets."""


def checked_settings(
    url: str,
    basic_auth_user_info: str | None = None,
    bearer_auth_token: str | None = None,
    ssl_cafile: str | None = None,
) -> RegistrySettings:
    """The registry's settings, checked against the URL rules both halves share; a one-line
    :class:`UsageError` that repeats no secret otherwise."""
    problem = url_problem(url, REGISTRY_NAMES)
    if problem:
        raise UsageError(f"--schema-registry-url: {shown_url(url)!r} {problem}")
    if basic_auth_user_info is not None and bearer_auth_token is not None:
        raise UsageError(
            "the registry's basic auth user info and bearer token are both set: give one of them"
        )
    if basic_auth_user_info is not None and ":" not in basic_auth_user_info:
        raise UsageError("the registry's basic auth user info: expected USER:PASSWORD (value hidden)")
    credentials = (
        "the registry's basic auth user info"
        if basic_auth_user_info is not None
        else "the registry's bearer token"
        if bearer_auth_token is not None
        else None
    )
    problem = credentials_problem(url, credentials, ssl_cafile is not None, REGISTRY_NAMES)
    if problem:
        raise UsageError(problem)
    return RegistrySettings(url, basic_auth_user_info or "", bearer_auth_token or "", ssl_cafile or "")


def value_subject(topic: str, override: str | None = None) -> str:
    """The subject of a topic's values under the default (TopicNameStrategy) naming."""
    return override if override else f"{topic}-value"


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx is returned as an error, not followed: urllib would send the credentials along."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class RegistryClient:
    """A blocking client for the few GETs the jobs need (the standard library's urllib)."""

    def __init__(self, settings: RegistrySettings, timeout_s: float = TIMEOUT_S) -> None:
        self.settings = settings
        self.timeout_s = timeout_s
        self._opener = urllib.request.build_opener(
            _NoRedirects(), urllib.request.HTTPSHandler(context=settings.ssl_context())
        )

    def get(self, path: str, what: str, expect: type[dict[str, Any]] | type[list[Any]] = dict) -> Any:
        """GET ``path`` under the base URL and decode its JSON (an object, or a list:
        ``expect``), as the protocol interprets answers; :class:`RegistryError` otherwise."""
        url = self.settings.base + path
        shown = shown_url(url)
        answer = self._answer(url, shown)
        secrets = self.settings.secrets()
        try:
            return interpret(answer, what, shown, time.time(), secrets, names=REGISTRY_NAMES, expect=expect)
        except SchemaNotFoundError:
            raise RegistryError(
                f"schema registry has no {shown} ({answer.status}){answers.detail(answer.body, secrets)}; "
                "is the subject registered? (--value-subject)"
            ) from None
        except answers.RegistryError as e:
            raise RegistryError(f"schema registry: {e}") from None

    def _answer(self, url: str, shown: str) -> Answer:
        """The answer to a GET of ``url``, its body read up to MAX_ANSWER_BYTES."""
        request = urllib.request.Request(url, headers=self.settings.headers())
        try:
            with self._opener.open(request, timeout=self.timeout_s) as reply:
                body = reply.read(MAX_ANSWER_BYTES + 1)
                return Answer(reply.status, body[:MAX_ANSWER_BYTES], len(body) <= MAX_ANSWER_BYTES)
        except urllib.error.HTTPError as e:
            try:
                body = e.read(MAX_ANSWER_BYTES + 1)
            except OSError:
                body = b""
            headers = e.headers
            return Answer(
                e.code,
                body[:MAX_ANSWER_BYTES],
                len(body) <= MAX_ANSWER_BYTES,
                headers.get("Retry-After") if headers else None,
                headers.get("Location") if headers else None,
            )
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = e.reason if isinstance(e, urllib.error.URLError) else e
            said = answers.detail(str(reason).encode(), self.settings.secrets()).removeprefix(": ")
            raise RegistryError(f"schema registry at {shown} did not answer: {said}") from None

    def versions(self, subject: str) -> list[int]:
        """The subject's version numbers, oldest first."""
        found = self.get(subject_versions(subject), f"the versions of subject {subject!r}", expect=list)
        with _one_line():
            return version_list(found, subject)

    def version(self, subject: str, version: int | Literal["latest"]) -> SubjectVersion:
        """One version of ``subject`` (``"latest"`` for the newest)."""
        found = self.get(subject_version(subject, version), f"version {version} of subject {subject!r}")
        with _one_line():
            return subject_version_of(found, subject)

    def all_versions(self, subject: str) -> list[SubjectVersion]:
        """Every version of ``subject``, oldest first; the last is the latest."""
        return [self.version(subject, v) for v in self.versions(subject)]

    def referenced(self, version: SubjectVersion) -> dict[str, str]:
        """The texts of every schema ``version`` references, and theirs in turn, by reference
        name (the protocol's walk: each subject version once, a bounded number in all)."""
        walk = ReferenceWalk(version.references)
        with _one_line():
            while (ref := walk.next()) is not None:
                found = self.version(ref.subject, ref.version)
                walk.found(ref, found.schema, found.references)
        return walk.texts


@contextlib.contextmanager
def _one_line() -> Iterator[None]:
    """The protocol's verdict on an answer as the jobs' one-line :class:`RegistryError`."""
    try:
        yield
    except answers.RegistryError as e:
        raise RegistryError(f"schema registry: {e}") from None
