"""sidecar/formats is pure like the core: the core's extractor calls it on the hot path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import sidecar.formats
from tests.unit.core.test_purity import imported_modules

FORMATS = Path(sidecar.formats.__file__).parent
FORBIDDEN_ROOTS = {"asyncio", "aiokafka", "aiohttp", "time", "socket", "threading", "tempfile", "sidecar"}
ALLOWED_OWN = {"sidecar.core.records", "sidecar.formats"}


def test_formats_import_no_io_and_nothing_of_the_service() -> None:
    offenders = {
        f"{path.name}: {name}"
        for path in FORMATS.glob("*.py")
        for name in imported_modules(path)
        if name.split(".")[0] in FORBIDDEN_ROOTS and not any(name.startswith(own) for own in ALLOWED_OWN)
    }
    assert not offenders


def test_the_core_loads_no_decoder_until_an_extractor_asks_for_one() -> None:
    decoders = "('fastavro', 'google.protobuf')"
    probe = f"import sys, sidecar.core; print(sorted(m for m in {decoders} if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
