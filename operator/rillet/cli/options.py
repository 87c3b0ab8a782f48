"""Command-line pieces shared by the App commands and the Table commands (no pyspark).

The Table commands run in the operator image, which has no pyspark: they take what they share
with `rillet run` from here, not from `cli.apps`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

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
