"""The `rillet dev ...` commands: start, inspect, check and stop the local stack, run the demo.

The product's command line (rillet.cli) adds this group when the package is installed (the
`rillet.commands` entry point): the images carry no development stack, so no `rillet dev` there.
Each command imports what it needs when it runs.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import rich.markup
import typer
from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from rillet_devstack.stack import StackState

app = typer.Typer(help="The local stack: Kubernetes control plane, Kafka, Spark connector.")
node_app = typer.Typer(help="Stop (as a crash would) and start the stack's extra nodes.")
app.add_typer(node_app, name="node")
image_app = typer.Typer(help="Build a user's image (FROM the runtime) and put it on every node.")
app.add_typer(image_app, name="image")
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


@app.command("up")
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
    nodes: Annotated[
        int,
        typer.Option(
            min=1,
            max=3,
            help="Worker nodes (rillet-node, rillet-node-2, rillet-node-3): a running stack "
            "gets the missing ones and keeps any more it has.",
        ),
    ] = 1,
    object_store: Annotated[
        bool,
        typer.Option(
            help="Also run an S3 object store (SeaweedFS, built once) with a bucket and a "
            "Secret rillet-objectstore in namespace default; `rillet dev env` prints its "
            "endpoint and key."
        ),
    ] = False,
    schema_registry: Annotated[
        bool,
        typer.Option(
            help="Also run a schema registry with the Confluent API (Apicurio Registry, "
            "fetched once; needs Java 21+) and a Secret rillet-schema-registry in namespace "
            "default; `rillet dev env` prints its URL and user."
        ),
    ] = False,
) -> None:
    """Provision what is missing, start the stack (or reuse a running one), print its env."""
    from rillet_devstack import schemaregistering, stack, starting
    from rillet_devstack.commands import CommandFailedError
    from rillet_devstack.packages import PackagesUnavailableError
    from rillet_devstack.processes import ComponentFailedError
    from rillet_devstack.toolchain import MissingToolError

    started = time.monotonic()
    reused = stack.running()
    try:
        state = starting.up(
            brokers=brokers,
            with_node=node,
            secured=kafka_security == "sasl-ssl",
            nodes=nodes,
            object_store=object_store,
            schema_registry=schema_registry,
            report=_timed_step,
        )
    except (
        MissingToolError,
        starting.NodeUnavailableError,
        PackagesUnavailableError,
        schemaregistering.NoJavaError,
    ) as error:
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


@app.command("env")
def dev_env() -> None:
    """Print the environment of the running stack (for `eval $(rillet dev env)`)."""
    from rillet_devstack import stack

    state = stack.running()
    if state is None:
        raise _fail("no stack is running: start one with `rillet dev up`")
    _print_env(state)


@app.command("status")
def dev_status() -> None:
    """Show each process of the stack and whether it runs."""
    from rillet_devstack import stack

    state = stack.load()
    if state is None:
        console.print("no stack recorded")
        raise typer.Exit(code=1)
    healthy = True
    for name, pid, alive in stack.describe(state):
        healthy &= alive
        mark = "[green]running[/green]" if alive else "[red]stopped[/red]"
        console.print(f"{name:<26} pid {pid:<8} {mark}")
    for extra in state.extra_nodes:
        anchor = str(extra.anchor.pid) if extra.anchor else "-"
        mark = "[green]running[/green]" if extra.running else "[red]stopped[/red]"
        console.print(f"{extra.name + ' (node)':<26} pid {anchor:<8} {mark}")
    console.print(f"apiserver {state.apiserver}  kafka {state.kafka_bootstrap}")
    if state.object_store is not None:
        console.print(f"s3 {state.object_store.endpoint}  bucket {state.object_store.bucket}")
    if state.schema_registry is not None:
        console.print(f"schema registry {state.schema_registry.url}")
    if state.node is not None and healthy:
        for line in stack.describe_nodes(state):
            console.print(line, highlight=False)
    raise typer.Exit(code=0 if healthy else 1)


@app.command("smoke")
def dev_smoke() -> None:
    """Check the running stack end to end: Kubernetes, Kafka, Spark with the Kafka connector."""
    from rillet_devstack import smoke, stack

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


@app.command("demo")
def dev_demo() -> None:
    """Word count end to end: the operator makes topics, Spark runs the App, counts read back."""
    from rillet_devstack import demo, stack

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


@app.command("down")
def dev_down() -> None:
    """Stop every process of the stack."""
    from rillet_devstack import stopping

    stopped = stopping.down()
    console.print(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}")


def _running_stack() -> StackState:
    from rillet_devstack import stack

    state = stack.running()
    if state is None:
        raise _fail("no stack is running: start one with `rillet dev up`")
    return state


@node_app.command("stop")
def dev_node_stop(
    name: Annotated[str, typer.Argument(help="rillet-node-2 or rillet-node-3")],
) -> None:
    """Stop an extra node as a crash would: every process in its cgroup SIGKILLed at once."""
    from rillet_devstack import nodegrowing

    state = _running_stack()
    try:
        killed = nodegrowing.stop(state, name)
    except nodegrowing.UnknownNodeError as error:
        raise _fail(str(error)) from None
    console.print(f"{name} stopped: {len(killed)} processes killed")


@node_app.command("start")
def dev_node_start(
    name: Annotated[str, typer.Argument(help="rillet-node-2 or rillet-node-3")],
) -> None:
    """Start a stopped extra node again, with the state it had; returns once it is Ready."""
    from rillet_devstack import nodegrowing
    from rillet_devstack.processes import ComponentFailedError

    state = _running_stack()
    try:
        nodegrowing.start(state, name, report=_timed_step)
    except (nodegrowing.UnknownNodeError, ComponentFailedError) as error:
        raise _fail(str(error)) from None


@image_app.command("build")
def dev_image_build(
    directory: Annotated[
        Path, typer.Argument(help="The build context: the folder holding the Dockerfile.")
    ],
    tag: Annotated[str, typer.Option("--tag", "-t", help="The image's name, e.g. my-app:dev.")],
    file: Annotated[
        Path | None,
        typer.Option("--file", "-f", help="The Dockerfile (default: DIRECTORY/Dockerfile)."),
    ] = None,
) -> None:
    """Build a Dockerfile with the stack's buildah, its build argument RUNTIME_IMAGE set to the
    stack's runtime image, and import the image into every node; prints the name for the App's
    spec.image (docs/python-pipelines.md)."""
    from rillet_devstack import userimages
    from rillet_devstack.commands import CommandFailedError

    try:
        request = userimages.BuildRequest.of(directory, name=tag, dockerfile=file)
    except (userimages.InvalidNameError, FileNotFoundError) as error:
        raise _fail(str(error)) from None
    state = _running_stack()
    try:
        nodes = userimages.build(state, request, report=_timed_step)
    except (userimages.NoNodeError, CommandFailedError) as error:
        raise _fail(str(error)) from None
    console.print(f"{request.reference} on {', '.join(nodes)}", highlight=False)
    typer.echo(request.name)
