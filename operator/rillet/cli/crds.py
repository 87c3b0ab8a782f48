"""`rillet crds`: the CustomResourceDefinitions, generated from the API models (`crdgen`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

app = typer.Typer(help="The CustomResourceDefinitions, generated from the API models.")
console = Console(stderr=True)


@app.command("generate")
def crds_generate(
    root: Annotated[Path, typer.Option(help="Repository root to write into.")] = Path("."),
) -> None:
    """Regenerate crds/, charts/rillet/crds/, docs/api.md and the chart's values.schema.json
    and README.md from the pydantic models."""
    from rillet.crdgen import generating

    for path in generating.write_repository(root):
        console.print(f"wrote {path}")
