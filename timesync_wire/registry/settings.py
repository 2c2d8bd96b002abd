"""Where the registry is and how to authenticate: what every request carries, for both transports.

Settings are named as Confluent's clients name them: the URL (the base of Confluent's API:
Confluent's registry serves it at its root, Apicurio under ``/apis/ccompat/v7``), basic auth user
info (``user:password``) or a bearer token, and a CA file for TLS. Each half checks them against
the URL rules (:mod:`.urls`) where it reads them, and hands them to its transport; this module
says what goes on the wire: the headers of every request, the TLS context, and which strings are
secrets never to repeat in a message.
"""

from __future__ import annotations

import base64
import ssl
from dataclasses import dataclass

from timesync_wire.registry.urls import shown_url

#: Confluent's media type first; a registry that knows only JSON answers that.
ACCEPT = "application/vnd.schemaregistry.v1+json, application/json"


@dataclass(frozen=True, slots=True)
class RegistrySettings:
    """The registry's URL and credentials (empty: not set). ``repr`` shows no secret."""

    url: str
    basic_auth_user_info: str = ""
    bearer_auth_token: str = ""
    ssl_cafile: str = ""

    def __repr__(self) -> str:  # never the credentials
        return f"RegistrySettings(url={shown_url(self.url)!r})"

    @property
    def base(self) -> str:
        """The URL the API paths (:mod:`.protocol`) are appended to."""
        return self.url.rstrip("/")

    def headers(self) -> dict[str, str]:
        """The headers of every request: what is accepted, no compression (the size bound is on
        what is read: no decompression bomb), and the credentials, basic before bearer."""
        headers = {"Accept": ACCEPT, "Accept-Encoding": "identity"}
        if self.basic_auth_user_info:
            token = base64.b64encode(self.basic_auth_user_info.encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        elif self.bearer_auth_token:
            headers["Authorization"] = f"Bearer {self.bearer_auth_token}"
        return headers

    def ssl_context(self) -> ssl.SSLContext | None:
        """A context trusting ``ssl_cafile``; ``None``: the system's defaults."""
        return ssl.create_default_context(cafile=self.ssl_cafile) if self.ssl_cafile else None

    def secrets(self) -> tuple[str, ...]:
        """What a message must never repeat should the registry echo it: the token, the user
        info, its password, and the basic header's base64 (strings of 4 characters or more)."""
        found = [self.bearer_auth_token, self.basic_auth_user_info]
        if self.basic_auth_user_info:
            found.append(self.basic_auth_user_info.partition(":")[2])
            found.append(self.headers()["Authorization"].removeprefix("Basic "))
        return tuple(s for s in found if len(s) >= 4)
