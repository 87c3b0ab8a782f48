"""`rillet class-archive`: the class-data sharing archive of the Spark driver's classes, which
the runtime image is built with (runtime.jvm.classsharing does the work)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rillet.cli import apps
from rillet.runtime.jvm import classsharing


def register(app: typer.Typer) -> None:
    """Add `class-archive` to the `rillet` command line."""
    app.command("class-archive")(class_archive)


def class_archive(
    archive: Annotated[Path, typer.Argument(help="Where to write the archive.")],
    jars: apps.JarsOption = None,
) -> None:
    """Write a class-data sharing archive of the Spark driver's classes: a driver given it in
    RILLET_SPARK_CLASS_ARCHIVE starts sooner (the runtime image has one)."""
    if not jars:
        raise typer.BadParameter(f"pass --jars or set {apps.JARS_ENV}", param_hint="--jars")
    classsharing.build(archive, jars.split(","))
    typer.echo(f"wrote {archive} ({archive.stat().st_size // 2**20} MiB)", err=True)
