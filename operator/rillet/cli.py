"""The `rillet` command line: the operator, the local stack (`rillet dev ...`) and tooling.

Subcommands import what they need when they run: `rillet operator run` in the operator image
must not load the development stack (or pyspark).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import rich.markup
import typer
from rich.console import Console
from rich.text import Text

from rillet.runtime import commands as runtime_commands
from rillet.serving import commands as serving_commands

if TYPE_CHECKING:
    from rillet.devstack.stack import StackState

app = typer.Typer(help="Rillet: Kafka stream processing on Kubernetes.", no_args_is_help=True)
dev = typer.Typer(help="The local stack: Kubernetes control plane, Kafka, Spark connector.")
app.add_typer(dev, name="dev")
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
    if ctx.invoked_subcommand in RUNTIME_COMMANDS and not os.environ.get("RILLET_SPARK_JARS"):
        # Outside the runtime image, Spark's Kafka connector comes from the local stack's cache
        # (provisioned on first use). Only for the Spark commands: the others never need it.
        from rillet.devstack.spark import spark_jars

        os.environ["RILLET_SPARK_JARS"] = ",".join(str(jar) for jar in spark_jars())
    if ctx.invoked_subcommand == "run" and not os.environ.get("RILLET_SPARK_CLASS_ARCHIVE"):
        # Likewise the drivers' class archive, if `rillet dev up` made one.
        from rillet.devstack.spark import class_archive

        if (archive := class_archive()) is not None:
            os.environ["RILLET_SPARK_CLASS_ARCHIVE"] = str(archive)


console = Console(stderr=True)


@contextlib.contextmanager
def _timed_step(name: str) -> Iterator[Callable[[str], None]]:
    """Show a step while it runs (with its latest progress line), then how long it took."""
    started = time.monotonic()
    printed = [started]
    with console.status(f"{name} ...") as status:

        def update(detail: str) -> None:
            text = Text(f"{name} ... {detail}")
            # One line only: a wrapped status line redraws over itself.
            text.truncate(max(console.width - 3, 20), overflow="ellipsis")
            status.update(text)
            # A log (CI) has no spinner: a line every 10 s shows the step is moving.
            if not console.is_terminal and time.monotonic() - printed[0] >= 10:
                printed[0] = time.monotonic()
                console.print(text, highlight=False)

        yield update
    console.print(f"[green]✓[/green] {name} [dim]{time.monotonic() - started:.1f}s[/dim]")


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code=1)


KafkaSecurityChoice = Literal["none", "sasl-ssl"]


@dev.command("up")
def dev_up(
    brokers: Annotated[
        int, typer.Option(min=1, max=3, help="Kafka brokers (3 for replication tests).")
    ] = 1,
    node: Annotated[
        bool,
        typer.Option(
            help="Start a worker node (containerd, kubelet, DNS, storage) so pods run; "
            "--no-node: control plane and Kafka only, pods stay Pending."
        ),
    ] = True,
    kafka_security: Annotated[
        KafkaSecurityChoice,
        typer.Option(
            help="sasl-ssl: Kafka on SASL_SSL (a certificate from the stack's CA, SCRAM-SHA-512, "
            "ACLs enforced); `rillet dev env` then prints the admin's credentials."
        ),
    ] = "none",
) -> None:
    """Provision what is missing, start the stack (or reuse a running one), print its env."""
    from rillet.devstack import stack
    from rillet.devstack.commands import CommandFailedError
    from rillet.devstack.packages import PackagesUnavailableError
    from rillet.devstack.processes import ComponentFailedError
    from rillet.devstack.toolchain import MissingToolError

    started = time.monotonic()
    reused = stack.running()
    try:
        state = stack.up(
            brokers=brokers,
            with_node=node,
            secured=kafka_security == "sasl-ssl",
            report=_timed_step,
        )
    except (MissingToolError, stack.NodeUnavailableError, PackagesUnavailableError) as error:
        raise _fail(str(error)) from None
    except (CommandFailedError, ComponentFailedError) as error:
        raise _fail(str(error)) from None
    # Reused: the same processes (its images may have been rebuilt from changed sources).
    verb = "reused" if reused and reused.processes == state.processes else "ready"
    console.print(f"stack {verb} in {time.monotonic() - started:.1f}s")
    _print_env(state)


def _print_env(state: StackState) -> None:
    for key, value in state.environment().items():
        typer.echo(f"export {key}={value}")


@dev.command("env")
def dev_env() -> None:
    """Print the environment of the running stack (for `eval $(rillet dev env)`)."""
    from rillet.devstack import stack

    state = stack.running()
    if state is None:
        raise _fail("no stack is running: start one with `rillet dev up`")
    _print_env(state)


@dev.command("status")
def dev_status() -> None:
    """Show each process of the stack and whether it runs."""
    from rillet.devstack import stack

    state = stack.load()
    if state is None:
        console.print("no stack recorded")
        raise typer.Exit(code=1)
    healthy = True
    for name, pid, alive in stack.describe(state):
        healthy &= alive
        mark = "[green]running[/green]" if alive else "[red]stopped[/red]"
        console.print(f"{name:<26} pid {pid:<8} {mark}")
    console.print(f"apiserver {state.apiserver}  kafka {state.kafka_bootstrap}")
    if state.node is not None and healthy:
        for line in stack.describe_node(state):
            console.print(line, highlight=False)
    raise typer.Exit(code=0 if healthy else 1)


@dev.command("smoke")
def dev_smoke() -> None:
    """Check the running stack end to end: Kubernetes, Kafka, Spark with the Kafka connector."""
    from rillet.devstack import smoke, stack

    state = stack.running()
    if state is None:
        raise _fail("no stack is running: start one with `rillet dev up`")
    for name, check in smoke.CHECKS:
        started = time.monotonic()
        try:
            detail = check(state)
        except Exception as error:
            raise _fail(f"{name}: {error}") from None
        console.print(f"[green]✓[/green] {detail} [dim]{time.monotonic() - started:.1f}s[/dim]")


@dev.command("demo")
def dev_demo() -> None:
    """Word count end to end: the operator makes topics, Spark runs the App, counts read back."""
    from rillet.devstack import demo, stack

    state = stack.running()
    if state is None:
        raise _fail("no stack is running: start one with `rillet dev up`")
    # soft_wrap: kubectl's tables keep their lines (wrapping them at the terminal width garbles
    # the columns); markup off, since they may hold brackets.
    try:
        demo.run(
            state,
            lambda line: console.print(
                "[green]✓[/green]", rich.markup.escape(line), highlight=False, soft_wrap=True
            ),
        )
    except (TimeoutError, RuntimeError) as error:  # what failed and where to look, in one line
        raise _fail(f"demo: {error}") from None


@dev.command("down")
def dev_down() -> None:
    """Stop every process of the stack."""
    from rillet.devstack import stack

    stopped = stack.down()
    console.print(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}")


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
