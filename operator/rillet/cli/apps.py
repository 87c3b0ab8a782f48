"""`rillet run` (an App on local Spark) and `rillet drive` (the driver of an App in its pod on
Kubernetes): the App commands (`rillet class-archive` is in `classarchive`).

`register(app)` adds them to the `rillet` command line. pyspark is imported only inside
`rillet run` and `rillet drive`, never when this module is imported: the operator image imports
`rillet.cli` and has no pyspark.

Spark needs its Kafka connector jars, which pyspark lacks. `rillet run` takes them from `--jars`
or from the RILLET_SPARK_JARS environment variable (comma-separated paths); `rillet.cli` sets
that variable from the local stack's cache (`rillet dev up` provisions the jars) when it is
unset. The runtime never looks for jars itself (it must not depend on the local stack).
"""

from __future__ import annotations

import dataclasses
import faulthandler
import functools
import logging
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rillet.cli import options as cli_options
from rillet.driverapi import runspecs, wiring
from rillet.reconcile import manifests, runresolving
from rillet.runtime.driver import localspark
from rillet.runtime.jvm import classsharing
from rillet.runtime.pod import terminating

if TYPE_CHECKING:  # imported where used: `rillet run` needs none of it
    from rillet.runtime.driver import driving
    from rillet.runtime.pod import incluster

JARS_ENV = "RILLET_SPARK_JARS"


def register(app: typer.Typer) -> None:
    """Add `run` and `drive` to the `rillet` command line."""
    app.command("run")(run_app)
    app.command("drive")(drive_app)


def parse_conf(pairs: list[str]) -> dict[str, str]:
    """KEY=VALUE pairs as a dict; raises typer.BadParameter on a pair without '='."""
    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--conf")
        conf[key.strip()] = value
    return conf


AppFile = Annotated[
    Path,
    typer.Argument(
        exists=True,
        dir_okay=False,
        readable=True,
        help="YAML file with the App, its Topics and Tables.",
    ),
]
AppNameOption = Annotated[
    str | None, typer.Option("--app", help="The App, if the file has several.")
]
NamespaceOption = Annotated[
    str | None,
    typer.Option(
        help="Namespace of the App (names its consumer group); default: the App's "
        "metadata.namespace, else default."
    ),
]
MasterOption = Annotated[str, typer.Option(help="Spark master.")]
CheckpointOption = Annotated[
    Path | None,
    typer.Option(
        help="Checkpoint directory; default: the App's checkpoint.location, else "
        "./.rillet/checkpoints/<namespace>/<app>."
    ),
]
MetricsPortOption = Annotated[
    int | None, typer.Option(help="Serve Prometheus metrics on this port (0: any free port).")
]
MetricsHostOption = Annotated[str, typer.Option(help="Address the metrics endpoint binds.")]
JarsOption = Annotated[
    str | None, typer.Option(envvar=JARS_ENV, help="Spark-Kafka connector jars, comma-separated.")
]
ConfOption = Annotated[
    list[str] | None, typer.Option("--conf", help="Extra Spark setting KEY=VALUE (repeatable).")
]
AvailableNowOption = Annotated[
    bool, typer.Option(help="Process what the inputs hold now, then stop.")
]
MaxOffsetsOption = Annotated[
    int | None,
    typer.Option(
        min=1, help="Most records a micro-batch reads from each input (overrides the App's)."
    ),
]


def _start_logging() -> None:
    """Log lines at INFO, and every thread's Python stack on a crash in C code (librdkafka,
    the JVM bridge) or on `kill -USR1 <pid>`: where a stuck driver is stuck. (`kill -QUIT` on
    its JVM prints the Java side.)"""
    logging.basicConfig(level=logging.INFO, format=cli_options.LOG_FORMAT)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    # Into file descriptor 2, the process's stderr: sys.stderr may be a stream without one (an
    # in-process CLI runner).
    faulthandler.enable(file=2, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=2, all_threads=True)


def run_app(
    app_yaml: AppFile,
    bootstrap_servers: cli_options.BootstrapOption,
    app_name: AppNameOption = None,
    namespace: NamespaceOption = None,
    master: MasterOption = "local[2]",
    checkpoint_dir: CheckpointOption = None,
    metrics_port: MetricsPortOption = None,
    metrics_host: MetricsHostOption = "127.0.0.1",
    jars: JarsOption = None,
    conf: ConfOption = None,
    available_now: AvailableNowOption = False,
    max_offsets_per_trigger: MaxOffsetsOption = None,
) -> None:
    """Run an App on local Spark until it ends or is stopped (SIGTERM or Ctrl-C: at a batch end).

    A second run of the App on the same checkpoint is its warm standby: it warms up, waits, and
    takes over within seconds once the first one's process is gone.
    """
    _start_logging()
    if not jars:
        raise typer.BadParameter(
            f"Spark needs the Kafka connector jars: pass --jars or set {JARS_ENV} "
            f"(`rillet dev up` provisions them)",
            param_hint="--jars",
        )
    spec = _local_run_spec(
        app_yaml,
        bootstrap_servers=bootstrap_servers,
        app_name=app_name,
        namespace=namespace,
        checkpoint_dir=checkpoint_dir,
        available_now=available_now,
        max_offsets_per_trigger=max_offsets_per_trigger,
    )
    from rillet.runtime.driver import (  # pyspark lives here: imported only to run
        checkpoints,
        driving,
    )

    options = _local_run_options(
        app_yaml,
        app_name=app_name,
        master=master,
        jars=jars,
        conf=conf,
        metrics_host=metrics_host,
        metrics_port=metrics_port,
    )
    typer.echo(
        f"App {spec.namespace}/{spec.app}: checkpoint {spec.checkpoint_location}, "
        f"consumer group {spec.consumer_group}",
        err=True,
    )
    try:
        driving.run(spec, options)
    except (driving.QueryFailedError, checkpoints.CheckpointLostError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=1) from None


def _local_run_spec(
    app_yaml: Path,
    *,
    bootstrap_servers: str,
    app_name: str | None,
    namespace: str | None,
    checkpoint_dir: Path | None,
    available_now: bool,
    max_offsets_per_trigger: int | None,
) -> runspecs.RunSpec:
    """The run spec of the App in the manifest file, as the options change it; a usage error
    naming APP_YAML if the file does not give one."""
    documents = cli_options.load_manifests(app_yaml)
    registry = cli_options.schema_registry()
    try:
        app = manifests.pick_app(manifests.parse_manifests(documents), app_name)
        ns = namespace or app.metadata.namespace or runresolving.DEFAULT_NAMESPACE
        default_checkpoint = Path.cwd() / ".rillet" / "checkpoints" / ns / str(app.metadata.name)
        spec = manifests.build_run_spec_from_manifests(
            documents,
            bootstrap_servers=bootstrap_servers,
            app_name=app_name,
            checkpoint_location=str(checkpoint_dir or default_checkpoint),
            namespace=namespace,
            schema_registry=registry,
        )
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="APP_YAML") from None
    overrides = _run_overrides(
        checkpoint_dir=checkpoint_dir,
        available_now=available_now,
        max_offsets_per_trigger=max_offsets_per_trigger,
    )
    return spec.model_copy(update=overrides)


def _run_overrides(
    *, checkpoint_dir: Path | None, available_now: bool, max_offsets_per_trigger: int | None
) -> dict[str, Any]:
    """The run spec's fields that `rillet run`'s options override."""
    overrides: dict[str, Any] = {}
    if checkpoint_dir is not None:  # given on the command line: wins over the App's
        overrides["checkpoint_location"] = str(checkpoint_dir)
    if available_now:
        overrides["trigger"] = runspecs.TriggerSpec(available_now=True)
    if max_offsets_per_trigger is not None:
        overrides["max_offsets_per_trigger"] = max_offsets_per_trigger
    return overrides


def _local_run_options(
    app_yaml: Path,
    *,
    app_name: str | None,
    master: str,
    jars: str,
    conf: list[str] | None,
    metrics_host: str,
    metrics_port: int | None,
) -> driving.RunOptions:
    """How `rillet run` runs Spark: locally, with task retries, the jars and --conf settings,
    and the App's object store endpoint (its checkpoint's, which the run spec does not carry)."""
    from rillet.runtime.driver import driving  # pyspark lives here: imported only to run

    app = manifests.pick_app(
        manifests.parse_manifests(cli_options.load_manifests(app_yaml)), app_name
    )
    return driving.RunOptions(
        checkpoint_endpoint=app.spec.checkpoint.endpoint if app.spec.checkpoint else None,
        master=localspark.local_master_with_retries(master),
        spark_conf={
            **localspark.local_spark_conf(jars=jars.split(","), master=master),
            **parse_conf(conf or []),
        },
        metrics_host=metrics_host,
        metrics_port=metrics_port,
        python_path=[str(app_yaml.resolve().parent), str(Path.cwd())],
        class_archive=classsharing.archive_path(),
    )


RunSpecArgument = Annotated[
    Path, typer.Argument(help="The run spec (JSON of rillet.driverapi.runspecs.RunSpec).")
]
PodTemplateOption = Annotated[
    Path | None,
    typer.Option(help="Pod template of the executors (spark.kubernetes.executor.podTemplateFile)."),
]
TerminationLogOption = Annotated[
    Path,
    typer.Option(hidden=True, help="Where the one-line reason of a failure is written."),
]


def drive_app(
    run_spec: RunSpecArgument,
    executor_pod_template: PodTemplateOption = None,
    jars: JarsOption = None,
    metrics_port: MetricsPortOption = wiring.METRICS_PORT,
    metrics_host: MetricsHostOption = "0.0.0.0",  # scraped from outside the pod
    termination_log: TerminationLogOption = terminating.TERMINATION_LOG,
) -> None:
    """Run an App as its driver pod on Kubernetes (the operator's StatefulSet starts this).

    Spark settings come from RILLET_SPARK_CONF_JSON, the pod's identity from POD_NAME, POD_IP
    and POD_NAMESPACE, the App's name from RILLET_APP_NAME. Executors follow the App's
    status.executors.desired; the pod's rillet.io/progress annotation reports progress. SIGTERM
    stops at a batch end. A failure's reason goes to stderr and the termination log (exit 1).
    """
    _start_logging()
    spec, pod, conf, operator_conf = _checked_drive_settings(
        run_spec,
        jars=jars,
        executor_pod_template=executor_pod_template,
        termination_log=termination_log,
    )
    from rillet.runtime.driver import driving  # pyspark lives here: imported only to run

    options = driving.RunOptions(
        spark_conf=conf,
        run_conf_included=bool(operator_conf),
        metrics_host=metrics_host,
        metrics_port=metrics_port,
        python_path=[str(run_spec.resolve().parent), str(Path.cwd())],
        class_archive=classsharing.archive_path(),
    )
    typer.echo(f"App {spec.namespace}/{spec.app}: checkpoint {spec.checkpoint_location}", err=True)
    _drive(spec, pod=pod, options=options, termination_log=termination_log)


def _drive_failure(message: str, *, termination_log: Path) -> typer.Exit:
    """Exit 1, with the reason on stderr and in the termination log (the App's status reads it)."""
    typer.echo(f"error: {message}", err=True)
    terminating.write_termination_message(message, termination_log)
    return typer.Exit(code=1)


def _checked_drive_settings(
    run_spec: Path, *, jars: str | None, executor_pod_template: Path | None, termination_log: Path
) -> tuple[runspecs.RunSpec, incluster.PodIdentity, dict[str, str], dict[str, str]]:
    """The run spec, the pod's identity, the driver's Spark conf and the operator's part of it;
    a failure (exit 1) saying what is missing or wrong."""
    from rillet.runtime.pod import incluster
    from rillet.runtime.queries import kafkalogin

    fail = functools.partial(_drive_failure, termination_log=termination_log)
    try:
        spec = kafkalogin.with_credentials(_load_run_spec(run_spec))
        pod = incluster.PodIdentity.from_environ(os.environ)
        operator_conf = wiring.parse_spark_conf_json(os.environ.get(wiring.SPARK_CONF_ENV))
        conf = incluster.build_drive_conf(
            operator_conf=operator_conf,
            pod=pod,
            app_name=spec.app,
            jars=jars,
            executor_pod_template=_existing(executor_pod_template, "--executor-pod-template"),
        )
    except runspecs.ContractMismatchError as error:
        raise fail(terminating.summarize_error(error)) from None
    except ValueError as error:
        raise fail(str(error)) from None
    missing = incluster.missing_pod_settings(conf, pod)
    if missing:
        raise fail(f"{', '.join(missing)} not set: the driver pod gives them (downward API)")
    if not jars:
        raise fail(f"{JARS_ENV} is not set: the runtime image names the Kafka connector jars")
    pod = dataclasses.replace(
        pod, namespace=pod.namespace or spec.namespace, app_name=pod.app_name or spec.app
    )
    return spec, pod, conf, operator_conf


def _drive(
    spec: runspecs.RunSpec,
    *,
    pod: incluster.PodIdentity,
    options: driving.RunOptions,
    termination_log: Path,
) -> None:
    """Run the App, reporting its batches to the operator; a failure (exit 1) saying why,
    a Kafka refusal as the topics the App may not use."""
    from rillet.runtime.driver import driving
    from rillet.runtime.pod import incluster, reporting
    from rillet.runtime.queries import kafkalogin

    tally = reporting.BatchTally()
    try:
        driving.run(
            spec,
            options,
            on_batch=[tally.on_batch],
            alongside=functools.partial(incluster.alongside, pod=pod, tally=tally),
        )
    except Exception as error:
        logging.getLogger(__name__).exception("the App failed")
        text = str(error)
        if kafkalogin.is_refusal(text):
            refused = kafkalogin.refused_topics(spec)
            raise _drive_failure(
                kafkalogin.access_denied(text, spec, refused), termination_log=termination_log
            ) from None
        raise _drive_failure(
            terminating.summarize_error(error), termination_log=termination_log
        ) from None


def _load_run_spec(path: Path) -> runspecs.RunSpec:
    """The run spec file; ValueError saying what is wrong, without the values (secrets);
    runspecs.ContractMismatchError for a run spec of another contract version."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ValueError(f"cannot read the run spec {path}: {error.strerror}") from None
    return runspecs.parse(text, source=str(path))


def _existing(path: Path | None, option: str) -> str | None:
    if path is not None and not path.is_file():
        raise ValueError(f"{option}: no file {path}")
    return None if path is None else str(path)
