"""The runtime's commands: `rillet run` (an App on local Spark), `rillet drive` (the driver of an
App in its pod on Kubernetes) and `rillet table get`.

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
import functools
import logging
import os
from pathlib import Path
from typing import Annotated, Any

import pydantic
import typer
import yaml
from confluent_kafka import KafkaException

from rillet.api.v1alpha1 import fields
from rillet.reconcile import apprun
from rillet.runtime import clustertables, tables

JARS_ENV = "RILLET_SPARK_JARS"
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


def register(app: typer.Typer) -> None:
    """Add `run`, `drive` and `table get` to the `rillet` command line."""
    app.command("run")(run_app)
    app.command("drive")(drive_app)
    table = typer.Typer(help="Read Tables from their compacted topics.", no_args_is_help=True)
    table.command("get")(table_get)
    app.add_typer(table, name="table")


def load_manifests(path: Path) -> list[dict[str, Any]]:
    """The YAML documents of a manifest file (empty documents left out)."""
    with path.open(encoding="utf-8") as stream:
        return [d for d in yaml.safe_load_all(stream) if isinstance(d, dict)]


def parse_conf(pairs: list[str]) -> dict[str, str]:
    """KEY=VALUE pairs as a dict; raises typer.BadParameter on a pair without '='."""
    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--conf")
        conf[key.strip()] = value
    return conf


def local_spark_conf(*, jars: list[str], master: str) -> dict[str, str]:
    """Spark settings of a local `rillet run`: connector jars, quiet logs, no UI."""
    conf = {
        "spark.jars": ",".join(jars),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.log.level": "WARN",
    }
    if master.startswith("local"):
        conf |= {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}
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


def run_app(
    app_yaml: AppFile,
    bootstrap_servers: BootstrapOption,
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
    """Run an App on local Spark until it ends or is stopped (SIGTERM or Ctrl-C: at a batch end)."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    if not jars:
        raise typer.BadParameter(
            f"Spark needs the Kafka connector jars: pass --jars or set {JARS_ENV} "
            f"(`rillet dev up` provisions them)",
            param_hint="--jars",
        )
    documents = load_manifests(app_yaml)
    try:
        app = apprun.pick_app(apprun.parse_manifests(documents), app_name)
        ns = namespace or app.metadata.namespace or apprun.DEFAULT_NAMESPACE
        default_checkpoint = Path.cwd() / ".rillet" / "checkpoints" / ns / str(app.metadata.name)
        spec = apprun.build_run_spec_from_manifests(
            documents,
            bootstrap_servers=bootstrap_servers,
            app_name=app_name,
            checkpoint_location=str(checkpoint_dir or default_checkpoint),
            namespace=namespace,
        )
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="APP_YAML") from None
    overrides: dict[str, Any] = {}
    if checkpoint_dir is not None:  # given on the command line: wins over the App's
        overrides["checkpoint_location"] = str(checkpoint_dir)
    if available_now:
        overrides["trigger"] = apprun.TriggerSpec(available_now=True)
    if max_offsets_per_trigger is not None:
        overrides["max_offsets_per_trigger"] = max_offsets_per_trigger
    spec = spec.model_copy(update=overrides)

    from rillet.runtime import checkpoints, driving  # pyspark lives here: imported only to run

    options = driving.RunOptions(
        master=master,
        spark_conf={
            **local_spark_conf(jars=jars.split(","), master=master),
            **parse_conf(conf or []),
        },
        metrics_host=metrics_host,
        metrics_port=metrics_port,
        python_path=[str(app_yaml.resolve().parent), str(Path.cwd())],
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


RunSpecArgument = Annotated[
    Path, typer.Argument(help="The run spec (JSON of rillet.reconcile.apprun.RunSpec).")
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
    metrics_port: MetricsPortOption = 9090,
    metrics_host: MetricsHostOption = "0.0.0.0",  # scraped from outside the pod
    termination_log: TerminationLogOption = Path("/dev/termination-log"),
) -> None:
    """Run an App as its driver pod on Kubernetes (the operator's StatefulSet starts this).

    Spark settings come from RILLET_SPARK_CONF_JSON, the pod's identity from POD_NAME, POD_IP
    and POD_NAMESPACE, the App's name from RILLET_APP_NAME. Executors follow the App's
    status.executors.desired; the pod's rillet.io/progress annotation reports progress. SIGTERM
    stops at a batch end. A failure's reason goes to stderr and the termination log (exit 1).
    """
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    from rillet.runtime import incluster, reporting

    def fail(message: str) -> typer.Exit:
        typer.echo(f"error: {message}", err=True)
        incluster.write_termination_message(message, termination_log)
        return typer.Exit(code=1)

    try:
        spec = _load_run_spec(run_spec)
        pod = incluster.PodIdentity.from_environ(os.environ)
        conf = incluster.build_drive_conf(
            operator_conf=incluster.parse_spark_conf_json(os.environ.get(incluster.SPARK_CONF_ENV)),
            pod=pod,
            app_name=spec.app,
            jars=jars,
            executor_pod_template=_existing(executor_pod_template, "--executor-pod-template"),
        )
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

    from rillet.runtime import driving  # pyspark lives here: imported only to run

    tally = reporting.BatchTally()
    options = driving.RunOptions(
        spark_conf=conf,
        metrics_host=metrics_host,
        metrics_port=metrics_port,
        python_path=[str(run_spec.resolve().parent), str(Path.cwd())],
    )
    typer.echo(f"App {spec.namespace}/{spec.app}: checkpoint {spec.checkpoint_location}", err=True)
    try:
        driving.run(
            spec,
            options,
            on_batch=[tally.on_batch],
            alongside=functools.partial(incluster.alongside, pod=pod, tally=tally),
        )
    except Exception as error:
        logging.getLogger(__name__).exception("the App failed")
        raise fail(incluster.summarize_error(error)) from None


def _load_run_spec(path: Path) -> apprun.RunSpec:
    """The run spec file; ValueError saying what is wrong, without the values (secrets)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ValueError(f"cannot read the run spec {path}: {error.strerror}") from None
    try:
        return apprun.RunSpec.model_validate_json(text)
    except pydantic.ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
            for e in error.errors(include_input=False, include_url=False)
        )
        raise ValueError(f"{path} is not a run spec: {problems}") from None


def _existing(path: Path | None, option: str) -> str | None:
    if path is not None and not path.is_file():
        raise ValueError(f"{option}: no file {path}")
    return None if path is None else str(path)


TableArgument = Annotated[
    str, typer.Argument(help="The Table (its name, or its topic with --topic).")
]
KeyArgument = Annotated[
    str,
    typer.Argument(
        help="The key: text for string keys, JSON for json keys (an object may give "
        "some of the fields only)."
    ),
]
FileOption = Annotated[
    Path | None,
    typer.Option(
        "--file",
        "-f",
        exists=True,
        dir_okay=False,
        help="YAML file defining the Table (for its topic and key format).",
    ),
]
TopicOption = Annotated[
    str | None, typer.Option(help="The Table's topic (default: from --file, else TABLE).")
]
KeyFormatOption = Annotated[
    str | None, typer.Option(help="json, string or bytes (default: from --file, else string).")
]
TimeoutOption = Annotated[float, typer.Option(help="Seconds to read the topic in.")]
TableNamespaceOption = Annotated[
    str | None,
    typer.Option(
        "--namespace",
        "-n",
        help="Namespace of the Table in the cluster (default: the kubeconfig context's).",
    ),
]


WatchOption = Annotated[
    bool,
    typer.Option(
        "--watch",
        "-w",
        help="After the current value, print each change of the key as key<TAB>value "
        "(<TAB>(deleted) for a tombstone) until interrupted.",
    ),
]


def table_get(
    table: TableArgument,
    key: KeyArgument,
    bootstrap_servers: BootstrapOption,
    file: FileOption = None,
    topic: TopicOption = None,
    key_format: KeyFormatOption = None,
    namespace: TableNamespaceOption = None,
    watch: WatchOption = False,
    timeout: TimeoutOption = 60.0,
) -> None:
    """Print the latest value of KEY in a Table; exit 1 if the Table has no such key.

    The Table is found in --file, else in the cluster (kubeconfig, -n), else TABLE is read as a
    topic; --topic names the topic outright. One exact match prints its value; a partial JSON
    key prints `key<TAB>value` per match.
    """
    topic, fmt = _table_topic(table, file=file, topic=topic, namespace=namespace, fmt=key_format)
    try:
        if watch:
            entries, later = tables.watch_changelog(
                bootstrap_servers=bootstrap_servers, topic=topic, timeout=timeout
            )
        else:
            entries = tables.read_changelog(
                bootstrap_servers=bootstrap_servers, topic=topic, timeout=timeout
            )
    except (LookupError, TimeoutError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=2) from None
    found = tables.lookup(tables.latest_per_key(entries), key, fmt)
    if watch:
        for entry in found:
            _echo_change(entry)
        try:
            for entry in later:
                if entry.key is not None and tables.key_matches(entry.key, key, fmt):
                    _echo_change(entry)
        except KeyboardInterrupt:  # Ctrl-C ends a watch, as kubectl's
            return
        except KafkaException as error:  # the topic deleted, the cluster gone
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(code=2) from None
        return
    if not found:
        typer.echo(f"{table}: no key {key}", err=True)
        raise typer.Exit(code=1)
    exact = len(found) == 1 and tables.same_key(found[0].key, key, fmt)
    for entry in found:
        value = (entry.value or b"").decode(errors="replace")
        typer.echo(value if exact else f"{(entry.key or b'').decode(errors='replace')}\t{value}")


def _table_topic(
    table: str, *, file: Path | None, topic: str | None, namespace: str | None, fmt: str | None
) -> tuple[str, fields.Format]:
    """The Table's topic and key format: from --file, else the cluster, else TABLE itself."""
    if file is not None:
        try:
            declared = apprun.table_in(load_manifests(file), table)
        except ValueError as error:
            raise typer.BadParameter(str(error), param_hint="--file") from None
        return topic or apprun.topic_name(declared), _key_format(fmt or declared.spec.key_format)
    if topic is not None:
        return topic, _key_format(fmt or "string")
    try:
        found = clustertables.find_table(table, namespace)
    except clustertables.ClusterError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=2) from None
    if found is None:
        if namespace is not None:
            raise typer.BadParameter(
                "no cluster configured (no kubeconfig, not in a pod) to find the Table in: "
                "give --file or --topic",
                param_hint="-n",
            )
        return table, _key_format(fmt or "string")
    return found.topic, _key_format(fmt or found.key_format)


def _echo_change(entry: tables.Entry) -> None:
    key = (entry.key or b"").decode(errors="replace")
    value = "(deleted)" if entry.value is None else entry.value.decode(errors="replace")
    typer.echo(f"{key}\t{value}")  # typer.echo flushes: a pipe sees each change at once


def _key_format(text: str) -> fields.Format:
    if text not in ("json", "string", "bytes"):
        raise typer.BadParameter(f"{text!r}: use json, string or bytes", param_hint="--key-format")
    return text  # type: ignore[return-value]  # checked just above
