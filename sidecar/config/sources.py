"""The pydantic-settings sources of one load: a layer of already-translated values, and ``TIMESYNC_*`` env."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource


class FileLayer(PydanticBaseSettingsSource):
    """A dict of already-translated field values (from the file or from --set)."""

    def __init__(self, settings_cls: type[BaseSettings], values: dict[str, Any]) -> None:
        super().__init__(settings_cls)
        self.values = values

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self.values.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.values)


class TimesyncEnv(EnvSettingsSource):
    """``TIMESYNC_*`` variables from the mapping given to load_config() (os.environ by default)."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        # Names are matched case-insensitively (the model is not case sensitive), as pydantic does.
        return {name.lower(): value for name, value in self._environ.items()}
