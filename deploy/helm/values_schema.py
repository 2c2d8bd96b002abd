"""The Helm chart's values schema: its ``config`` part generated from the sidecar's config model.

``python -m deploy.helm.values_schema`` rewrites ``deploy/helm/timesync/values.schema.json``;
``--check`` only says whether the committed file is current (exit 1 when it is not), as
``tests/deploy/test_helm_values.py`` does. The rest of the file (image, probes, httpAuth, ...)
is the chart's own and is kept as written.

``config`` admits exactly the sidecar's keys, each with the JSON Schema of what the sidecar
accepts (:func:`sidecar.config.surface.json_schema`: its ``Literal`` values, bounds and value
forms, so every extractor, policy and guarantee the sidecar takes, and nothing else) and its
meaning as the description. The chart's own conventions on top:

* a required key may be ``""`` in values.yaml: the chart then fails at render, naming the key;
* secrets are refused by name: they come from a Secret as ``TIMESYNC_*`` variables, never from a
  ConfigMap;
* ``schemaRegistry.url``, which fills ``schema.registry.url`` unless that is set, takes what that
  key takes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sidecar.config.surface import json_schema, key_docs

SCHEMA_FILE = Path(__file__).resolve().parent / "timesync" / "values.schema.json"
#: Lines up to this long keep a JSON object or list on one line (the file stays short to read).
WIDTH = 110

CONFIG_DESCRIPTION = (
    "The sidecar's keys (Kafka-style, dotted), generated from its config model by "
    "`python -m deploy.helm.values_schema`: unknown keys and values the sidecar would refuse are "
    "rejected here, as the sidecar rejects them at start (`timesync-sidecar config` lists them)."
)
SECRETS_DESCRIPTION = (
    "Secrets never go into the ConfigMap: they come from a Secret as TIMESYNC_* variables "
    "(envFrom), http.auth.token from httpAuth."
)


def config_schema() -> dict[str, Any]:
    """The schema of ``.Values.config``."""
    model = json_schema()
    secrets = [d.key for d in key_docs() if d.secret]
    properties: dict[str, Any] = {}
    for key, schema in model["properties"].items():
        if key in secrets:
            continue
        if key in model["required"]:
            value = {k: v for k, v in schema.items() if k != "description"}
            described = f"{schema['description']} (required)"
            properties[key] = {"description": described, "anyOf": [{"const": ""}, value]}
        else:
            properties[key] = schema
    return {
        "description": CONFIG_DESCRIPTION,
        "type": "object",
        "additionalProperties": False,
        "propertyNames": {"description": SECRETS_DESCRIPTION, "not": {"enum": secrets}},
        "properties": properties,
    }


def generated(current: dict[str, Any]) -> dict[str, Any]:
    """``current`` (the chart's schema) with its ``config`` part generated from the model."""
    config = config_schema()
    registry = dict(current["properties"]["schemaRegistry"])
    url = {k: v for k, v in config["properties"]["schema.registry.url"].items() if k != "description"}
    registry["properties"] = {
        "url": {"description": "config's schema.registry.url unless that is set", **url}
    }
    return {**current, "properties": {**current["properties"], "schemaRegistry": registry, "config": config}}


def dumps(value: Any, indent: int = 0, lead: int = 0) -> str:
    """JSON with two-space indents, where an object or list that fits on its line stays there."""
    flat = json.dumps(value, ensure_ascii=False)
    if not isinstance(value, dict | list) or not value or indent + lead + len(flat) <= WIDTH:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = []
        for key, item in value.items():
            name = json.dumps(key, ensure_ascii=False) + ": "
            items.append(pad + name + dumps(item, indent + 2, len(name)))
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    return "[\n" + ",\n".join(pad + dumps(item, indent + 2) for item in value) + "\n" + " " * indent + "]"


def expected_text(path: Path = SCHEMA_FILE) -> str:
    """What the file at ``path`` should hold."""
    return dumps(generated(json.loads(path.read_text(encoding="utf-8")))) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.helm.values_schema", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is stale")
    args = parser.parse_args(argv)
    text = expected_text()
    if SCHEMA_FILE.read_text(encoding="utf-8") == text:
        print(f"{SCHEMA_FILE.name}: up to date")
        return 0
    if args.check:
        print(f"{SCHEMA_FILE.name} is stale: run python -m deploy.helm.values_schema", file=sys.stderr)
        return 1
    SCHEMA_FILE.write_text(text, encoding="utf-8")
    print(f"{SCHEMA_FILE.name}: updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
