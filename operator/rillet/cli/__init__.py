"""The `rillet` command line: the operator, the runtime, the CRDs, and the command groups of
installed extensions (`rillet dev ...` comes with the development stack, package rillet_devstack).

Subcommands import what they need when they run: `rillet operator run` in the operator image
must not load pyspark, and the images carry no development stack.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from rillet.runtime import commands as runtime_commands
from rillet.serving import commands as serving_commands

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
operator_app = typer.Typer(help="The Kubernetes operator.")
app.add_typer(operator_app, name="operator")
crds_app = typer.Typer(help="The CustomResourceDefinitions, generated from the API models.")
app.add_typer(crds_app, name="crds")
table_app = runtime_commands.register(app)
serving_commands.register(table_app)

# The commands that run Spark: only they need its Kafka connector jars.
RUNTIME_COMMANDS = ("run", "class-archive")


@app.callback()
def _main(ctx: typer.Context) -> None:
    """Rillet: Kafka stream processing on Kubernetes."""
    if ctx.invoked_subcommand in RUNTIME_COMMANDS:
        for _, setup in _installed(SPARK_SETUPS):
            setup(ctx.invoked_subcommand)


console = Console(stderr=True)


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code=1)


@crds_app.command("generate")
def crds_generate(
    root: Annotated[Path, typer.Option(help="Repository root to write into.")] = Path("."),
) -> None:
    """Regenerate crds/, charts/rillet/crds/, docs/api.md and the chart's values.schema.json
    and README.md from the pydantic models."""
    from rillet.crdgen import generating

    for path in generating.write_repository(root):
        console.print(f"wrote {path}")


@operator_app.command("run")
def operator_run(
    namespace: Annotated[
        list[str] | None,
        typer.Option(
            "--namespace",
            "-n",
            help="Watch only namespaces matching these (globs allowed); default: "
            "RILLET_NAMESPACES, else all.",
        ),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log at debug level.")] = False,
) -> None:
    """Run the operator against the cluster of the current kubeconfig (or in-cluster).

    It waits for Rillet's CRDs first and, with leader election on (RILLET_LEADER_ELECTION, as
    the chart sets), stands by until it holds the Lease."""
    import faulthandler
    import logging
    import signal

    from rillet.handlers import (
        registration,  # noqa: F401 - registers the handlers
        running,
    )
    from rillet.settings import OperatorSettings

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Probes every few seconds would drown what the operator does.
    for noisy in ("aiohttp.access", "kopf.activities.probe"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    settings = OperatorSettings()
    if namespace:  # the command line wins over RILLET_NAMESPACES
        settings = settings.model_copy(update={"namespaces": namespace})
    # A crash in a C extension (librdkafka) prints every thread's Python stack before the
    # process dies, and `kill -USR1 <pid>` prints them too: where a stuck operator is stuck.
    faulthandler.enable(all_threads=True)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    failure = running.run(settings)
    if failure:
        raise _fail(f"operator stopped: {failure}")


if __name__ == "__main__":
    app()
