"""The `rillet` command line: the operator, the runtime, the CRDs, and the command groups of
installed extensions (`rillet dev ...` comes with the development stack, package rillet_devstack).

One module per command group, each a thin typer layer over the package doing the work:
`operating` (`rillet operator run`), `crds` (`rillet crds generate`), `apps` (`rillet run`,
`rillet drive`), `classarchive` (`rillet class-archive`), `tables` and `tableserving`
(`rillet table get` and `rillet table serve`), with the options they share in `options`. This
module puts them together and adds the groups and Spark setups that installed packages declare
as entry points.

Subcommands import what they need when they run: `rillet operator run` in the operator image
must not load pyspark, and the images carry no development stack.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator
from typing import Any

import typer

from rillet.cli import apps, classarchive, crds, operating, tables, tableserving

# Entry-point groups of other distributions' packages: command groups added under their entry
# point's name (the development stack's `dev`), and functions given a Spark command's name
# before it runs (to set up its environment outside the runtime image).
COMMAND_GROUPS = "rillet.commands"
SPARK_SETUPS = "rillet.spark_setups"


def _installed(group: str) -> Iterator[tuple[str, Any]]:
    """(name, loaded object) of the group's entry points whose package is installed: this
    distribution declares the development stack's, which the images do not carry."""
    for entry in importlib.metadata.entry_points(group=group):
        try:
            yield entry.name, entry.load()
        except ModuleNotFoundError as error:  # its own package missing, not one it imports
            if error.name is None or not f"{entry.module}.".startswith(f"{error.name}."):
                raise


app = typer.Typer(help="Rillet: Kafka stream processing on Kubernetes.", no_args_is_help=True)
for _name, _group in _installed(COMMAND_GROUPS):
    app.add_typer(_group, name=_name)
app.add_typer(operating.app, name="operator")
app.add_typer(crds.app, name="crds")
apps.register(app)
classarchive.register(app)
tableserving.register(tables.register(app))

# The commands that run Spark: only they need its Kafka connector jars.
RUNTIME_COMMANDS = ("run", "class-archive")


@app.callback()
def _main(ctx: typer.Context) -> None:
    """Rillet: Kafka stream processing on Kubernetes."""
    if ctx.invoked_subcommand in RUNTIME_COMMANDS:
        for _, setup in _installed(SPARK_SETUPS):
            setup(ctx.invoked_subcommand)
