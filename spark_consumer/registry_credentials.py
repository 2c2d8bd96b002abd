"""Where the Spark job's registry credentials come from: the environment or a file, never the
command line.

A command line is visible to anyone on the machine (``ps``), in the pod spec and in Spark's UI,
so ``--schema-registry-basic-auth-user-info`` and ``--schema-registry-bearer-auth-token`` are
refused with one line that says where the credentials go instead (and does not repeat them):

* ``$TIMESYNC_SPARK_SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO`` (``USER:PASSWORD``) or
  ``$TIMESYNC_SPARK_SCHEMA_REGISTRY_BEARER_AUTH_TOKEN``, e.g. from a Kubernetes Secret with
  ``secretKeyRef``;
* ``--schema-registry-basic-auth-user-info-file FILE`` or
  ``--schema-registry-bearer-auth-token-file FILE``: a file holding it (a mounted Secret), read
  once; a final line break is dropped. The path is not a secret.

One source per credential: the variable and the file both set is an error, so a stale variable
cannot silently win over a mounted Secret.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from spark_consumer.options import UsageError
from spark_consumer.schema_registry import BASIC_AUTH_ENV, BEARER_TOKEN_ENV

#: (refused option, its variable, its file option, the argparse dest of the file option).
CREDENTIALS = (
    (
        "--schema-registry-basic-auth-user-info",
        BASIC_AUTH_ENV,
        "--schema-registry-basic-auth-user-info-file",
        "schema_registry_basic_auth_user_info_file",
    ),
    (
        "--schema-registry-bearer-auth-token",
        BEARER_TOKEN_ENV,
        "--schema-registry-bearer-auth-token-file",
        "schema_registry_bearer_auth_token_file",
    ),
)
#: The most of a credentials file that is read.
MAX_FILE_BYTES = 64 * 1024


class _Refused(argparse.Action):
    """An option that may not carry its value on the command line: a one-line error naming where
    it goes instead, without the value."""

    def __init__(self, option_strings: Sequence[str], dest: str, instead: str = "", **kwargs: Any) -> None:
        self.instead = instead
        super().__init__(option_strings, dest, nargs="?", help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        raise UsageError(
            f"{option_string}: credentials on the command line are visible to ps, in pod specs and "
            f"in Spark's UI, so they are not taken (value not shown); {self.instead}"
        )


def add_credential_options(group: Any) -> None:
    """The file options, and the refused command-line ones, into an argparse group."""
    for option, variable, file_option, _ in CREDENTIALS:
        group.add_argument(file_option, metavar="FILE", help=f"a file holding it (or ${variable})")
        group.add_argument(option, action=_Refused, instead=f"set ${variable} or {file_option} FILE")


def registry_credentials(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> tuple[str | None, str | None]:
    """(basic auth user info, bearer token), each from its variable or its file (``None``: unset)."""
    env = os.environ if environ is None else environ
    found: list[str | None] = []
    for _, variable, file_option, dest in CREDENTIALS:
        path = getattr(args, dest, None)
        from_env = env.get(variable) or None
        if path is not None and from_env is not None:
            raise UsageError(f"{file_option} and ${variable} are both set: give one")
        found.append(_read(path, file_option) if path is not None else from_env)
    return found[0], found[1]


def _read(path: str, option: str) -> str:
    try:
        with Path(path).open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise UsageError(f"{option}: cannot read {path!r}: {e.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise UsageError(f"{option}: {path!r} is larger than {MAX_FILE_BYTES} bytes; it should hold one line")
    try:
        text = data.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise UsageError(f"{option}: {path!r} is not UTF-8 text") from None
    if not text or "\n" in text:
        raise UsageError(f"{option}: {path!r} should hold the credential on one line (content not shown)")
    return text
