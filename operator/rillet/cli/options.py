"""Command-line pieces shared by the App commands and the Table commands (no pyspark).

The Table commands run in the operator image, which has no pyspark: they take what they share
with `rillet run` from here, not from `cli.apps`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pydantic
import typer
import yaml

from rillet.driverapi import runspecs
from rillet.reconcile import appresolving
from rillet.settings import SchemaRegistrySettings

BOOTSTRAP_ENV = "RILLET_KAFKA_BOOTSTRAP"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

BootstrapOption = Annotated[
    str,
    typer.Option(
        "--bootstrap-servers",
        "-b",
        envvar=BOOTSTRAP_ENV,
        help="Kafka bootstrap servers (host:port,...).",
    ),
]


def load_manifests(path: Path) -> list[dict[str, Any]]:
    """The YAML documents of a manifest file (empty documents left out)."""
    with path.open(encoding="utf-8") as stream:
        return [d for d in yaml.safe_load_all(stream) if isinstance(d, dict)]


def schema_registry() -> runspecs.SchemaRegistry | None:
    """The schema registry of RILLET_SCHEMA_REGISTRY_URL (`rillet dev env` exports it) for a
    local run spec. Its credentials stay in the environment, where the local driver reads them:
    the run spec names no credentials directory."""
    try:
        settings = SchemaRegistrySettings()
    except pydantic.ValidationError as error:
        problems = "; ".join(e["msg"] for e in error.errors(include_url=False))
        raise typer.BadParameter(problems, param_hint="RILLET_SCHEMA_REGISTRY_*") from None
    return appresolving.schema_registry(settings, credentials_dir=None)
