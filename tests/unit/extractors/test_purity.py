"""sidecar/extractors is pure like the core: the core calls its extractors on the hot path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import sidecar.extractors
from tests.unit.core.test_purity import imported_modules

EXTRACTORS = Path(sidecar.extractors.__file__).parent
FORBIDDEN_ROOTS = {"asyncio", "aiokafka", "aiohttp", "time", "socket", "threading", "tempfile", "sidecar"}
ALLOWED_OWN = {"sidecar.core.records", "sidecar.extractors"}


def test_extractors_import_no_io_and_nothing_of_the_service() -> None:
    offenders = {
        f"{path.name}: {name}"
        for path in EXTRACTORS.glob("*.py")
        for name in imported_modules(path)
        if name.split(".")[0] in FORBIDDEN_ROOTS and not any(name.startswith(own) for own in ALLOWED_OWN)
    }
    assert not offenders


def test_neither_the_core_nor_the_config_loads_a_decoder_until_an_extractor_asks_for_one() -> None:
    """The table of formats is light: a sidecar reading ``record`` or ``json:`` never imports
    fastavro or the protobuf runtime."""
    decoders = "('fastavro', 'google.protobuf')"
    for module in ("sidecar.core", "sidecar.config"):
        probe = f"import sys, {module}; print(sorted(m for m in {decoders} if m in sys.modules))"
        run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        assert run.stdout.strip() == "[]", module
