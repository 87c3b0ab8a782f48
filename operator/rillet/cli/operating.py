"""`rillet operator run`: the Kubernetes operator (`handlers`), in the foreground.

The handlers are imported when the command runs, not with this module: the rest of the command
line needs none of kopf.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

app = typer.Typer(help="The Kubernetes operator.")
console = Console(stderr=True)


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code=1)


@app.command("run")
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
