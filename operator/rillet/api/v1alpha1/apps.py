"""The App kind: a Spark Structured Streaming job from Kafka inputs to Topic and Table outputs.

An App reads its inputs as streaming views (one per input, named by `inputs[].name`), runs its
pipeline (Spark SQL over those views, or a Python function), and writes the results to Topics or
Tables. The operator runs the Spark driver, scales executors on Kafka lag between
`scaling.minExecutors` and `scaling.maxExecutors`, and reports progress in `status`.

The parts of the spec are in `appflows` (inputs, pipeline), `appoutputs` (outputs, dead-letter
topic) and `appresources` (scaling, resources, checkpoint, trigger); this module holds the App
as a whole: its name rule, its spec and its status; the Spark settings it may not set are in
`appsparkconf`.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator

from rillet.api.v1alpha1 import (
    appflows,
    appoutputs,
    appresources,
    appsparkconf,
    conditions,
    fields,
    objects,
    rules,
)

# An App's name prefixes its pods and names its driver Service: a DNS-1035 label. 45 characters
# at most: the driver StatefulSet is "<app>-driver", and Kubernetes labels its pods with
# controller-revision-hash "<statefulset>-<hash of up to 10 characters>", a label value of at most
# 63 characters (a StatefulSet name over 52 characters gets no pods). Spark's executor pod names
# (prefix + "-exec-<n>") fit as well.
APP_NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
APP_NAME_MAX_LENGTH = 45

Phase = Literal["Pending", "Running", "Suspended", "Failed"]
# Which partitions set an App's executor cap: its inputs' (the read stage) or its state's (the
# stage after a stateful query's shuffle), whichever runs more tasks at once.
CapBy = Literal["InputPartitions", "StatePartitions"]


def is_reserved_spark_conf(key: str) -> bool:
    """Whether an App's sparkConf may not set `key` (see appsparkconf)."""
    return appsparkconf.is_reserved(key)


def app_name_fits(name: str | None) -> bool:
    """Whether `name` can name an App's pods and Service (see APP_NAME_PATTERN)."""
    return name is None or (
        len(name) <= APP_NAME_MAX_LENGTH and re.fullmatch(APP_NAME_PATTERN, name) is not None
    )


APP_NAME_FITS = rules.Rule(
    rule=f"self.metadata.name.size() <= {APP_NAME_MAX_LENGTH} && "
    f"self.metadata.name.matches('{APP_NAME_PATTERN}')",
    message=f"metadata.name of an App names its pods and Service: use at most "
    f"{APP_NAME_MAX_LENGTH} characters, lowercase letters, digits and dashes, starting with a "
    f"letter (no dots)",
    check=lambda app: app_name_fits(app.metadata.name),
)


def _executor_account_fits(app: App) -> bool:
    conf = app.spec.spark_conf or {}
    account = conf.get(appsparkconf.EXECUTOR_ACCOUNT)
    return account is None or account == f"{app.metadata.name}{DRIVER_SUFFIX}"


# The driver's ServiceAccount is "<app>-driver" (reconcile.naming.app_driver_name).
DRIVER_SUFFIX = "-driver"
EXECUTOR_ACCOUNT_IS_THE_DRIVERS = rules.Rule(
    rule=f"!has(self.spec.sparkConf) || "
    f"!('{appsparkconf.EXECUTOR_ACCOUNT}' in self.spec.sparkConf) || "
    f"self.spec.sparkConf['{appsparkconf.EXECUTOR_ACCOUNT}'] == "
    f"self.metadata.name + '{DRIVER_SUFFIX}'",
    message=f"sparkConf {appsparkconf.EXECUTOR_ACCOUNT} may only name the ServiceAccount of "
    f"the App, <app>{DRIVER_SUFFIX} (for workload identity): executors run as no other account",
    field_path=".spec.sparkConf",
    check=_executor_account_fits,
)


def _lookups_not_of_tables(spec: AppSpec) -> list[str]:
    """Tables named by lookups that are not tableRef inputs of the App."""
    tables = {i.name for i in spec.inputs if i.table_ref is not None}
    return [
        lookup.table
        for item in spec.inputs
        for lookup in item.lookups or ()
        if lookup.table not in tables
    ]


LOOKUPS_NAME_TABLE_INPUTS = rules.Rule(
    rule="self.inputs.all(i, !has(i.lookups) || i.lookups.all(l, "
    "self.inputs.exists(t, t.name == l.table && has(t.tableRef))))",
    message="lookups[].table must name a tableRef input of this App: add the Table as an input "
    "(tableRef), and name that input",
    field_path=".inputs",
    check=lambda spec: not _lookups_not_of_tables(spec),
)


class AppSpec(objects.WireModel):
    """The streaming job: inputs, pipeline, outputs, and how it runs."""

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (LOOKUPS_NAME_TABLE_INPUTS,)

    image: Annotated[str, Field(min_length=1, max_length=1024)] = Field(
        description="Container image of the Spark driver and executors (with Rillet's runtime "
        "and, for python pipelines, the App's code).",
    )
    inputs: Annotated[list[appflows.Input], Field(min_length=1, max_length=16)] = Field(
        description="Kafka topics and Tables the pipeline reads, one view each.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
        },
    )
    pipeline: appflows.Pipeline = Field(description="What the App computes from its inputs.")

    @field_validator("inputs")
    @classmethod
    def _unique_input_names(cls, inputs: list[appflows.Input]) -> list[appflows.Input]:
        # The apiserver enforces this through the list's map keys (x-kubernetes-list-map-keys).
        names = [i.name for i in inputs]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"input names must be unique: {', '.join(duplicates)} is repeated")
        return inputs

    outputs: Annotated[list[appoutputs.Output], Field(min_length=1, max_length=16)] = Field(
        description="Topics and Tables the results are written to.",
    )
    scaling: appresources.Scaling = Field(
        default_factory=appresources.Scaling,
        description="Executor bounds and lag-based scaling.",
        json_schema_extra={"default": {}},
    )
    driver: appresources.DriverResources = Field(
        default_factory=appresources.DriverResources,
        description="Resources of the driver pod.",
        json_schema_extra={"default": {}},
    )
    executor: appresources.ExecutorResources = Field(
        default_factory=appresources.ExecutorResources,
        description="Resources of each executor pod.",
        json_schema_extra={"default": {}},
    )
    checkpoint: appresources.Checkpoint | None = Field(
        default=None,
        description="Where offsets and state are kept. Defaults to a volume of the App's own "
        "(a PersistentVolumeClaim of the driver).",
    )
    trigger: appresources.Trigger | None = Field(
        default=None,
        description="When micro-batches run. Absent: back to back, as soon as the last one ends.",
    )
    spark_conf: (
        Annotated[
            dict[str, Annotated[str, Field(max_length=4096)]],
            Field(max_length=128),
            appsparkconf.RULES,
        ]
        | None
    ) = Field(
        default=None,
        description="Extra Spark settings, e.g. spark.sql.shuffle.partitions. Refused, each with "
        "its reason: settings Rillet manages (spark.master, spark.executor.cores, ...), "
        "spark.kubernetes.* (the operator builds the pods), settings that load code from "
        "outside the image (spark.jars*, spark.plugins, listeners, extensions, catalogs, class "
        "paths), security settings (spark.authenticate*, spark.ui.*, spark.ssl.*, "
        "spark.sql.runSQLOnFiles, ...) and secret-looking keys (use a Secret). "
        "extraJavaOptions may hold -XX flags and -Xss only.",
    )
    dead_letter_topic: appoutputs.DeadLetter | None = Field(
        default=None,
        description="Where records that fail to process go. Absent: a failure stops the App.",
    )
    suspend: bool = Field(
        default=False,
        description="true: stop the driver and executors, keeping the checkpoint; false: run.",
    )


class ExecutorsOnNode(objects.WireModel):
    """How many of the App's executors run on one node."""

    name: str = Field(description="The node's name.")
    running: fields.Count32 = Field(description="Executor pods running there.")


class Executors(objects.WireModel):
    """Executor counts of the running App."""

    desired: fields.Count32 | None = Field(
        default=None, description="Executors the operator asks for."
    )
    ready: fields.Count32 | None = Field(
        default=None, description="Executors registered with the driver."
    )
    # Input partitions of up to 16 topics (int32 each) over the cores: int64.
    cap: fields.Count64 | None = Field(
        default=None,
        description="Most executors the App can keep busy: the tasks of its widest stage (input "
        "partitions, or a stateful query's state partitions when more) / executorCores (at "
        "least 1). Absent while the partition counts are unknown (then at most 1 executor).",
    )
    cap_by: CapBy | None = Field(
        default=None,
        description="What sets the cap: InputPartitions or StatePartitions (the stage after a "
        "stateful query's shuffle, whose partitions its checkpoint keeps).",
    )
    lost: fields.Count32 | None = Field(
        default=None,
        description="Executor pods on nodes that are not Ready (down, or cut off): Spark has "
        "lost them and runs their work on new executors, within the cap. Absent when none.",
    )
    nodes: list[ExecutorsOnNode] | None = Field(
        default=None,
        description="The running executors by node (those of `ready`), by node name.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )


class InputStatus(objects.WireModel):
    """One input of the running App: its Kafka topic, partitions and lag."""

    name: str = Field(description="Name of the input (its view).")
    topic: str = Field(description="Kafka topic the input reads.")
    partitions: fields.Count32 | None = Field(default=None, description="Partitions of the topic.")
    lag: fields.Count64 | None = Field(
        default=None,
        description="Records behind the topic's latest offsets, over its partitions.",
    )


class AppStatus(conditions.Status):
    """The App as last observed: where it runs, how big it is, how far behind."""

    phase: Phase | None = Field(
        default=None,
        description="Pending (starting), Running, Suspended (spec.suspend) or Failed.",
    )
    partitions: fields.Count64 | None = Field(
        default=None,
        description="Total partitions of the App's inputs: the most executor cores it can use.",
    )
    state_partitions: fields.Count32 | None = Field(
        default=None,
        description="Partitions of the App's state (spark.sql.shuffle.partitions as its "
        "checkpoint keeps it), as its stateful queries report them. Absent for a stateless App. "
        "Input partitions added later do not change it: executors past it read and "
        "pre-aggregate, the state is updated by this many tasks.",
    )
    executors: Executors | None = Field(default=None, description="Executor counts.")
    inputs: list[InputStatus] | None = Field(
        default=None,
        description="Topic, partitions and lag of each input read as a stream.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
        },
    )
    lag: fields.Count64 | None = Field(
        default=None,
        description="Records behind the inputs' latest offsets, over all partitions.",
    )
    last_batch_time: datetime | None = Field(
        default=None,
        strict=False,
        description="When the driver last completed a micro-batch.",
    )
    rows_per_second: float | None = Field(
        default=None,
        description="Rows the App processed per second over its last batches.",
    )


class App(objects.Resource):
    """A stream-processing App: Spark Structured Streaming from Kafka to Topics and Tables."""

    kind_info: ClassVar[objects.KindInfo] = objects.KindInfo(
        kind="App",
        plural="apps",
        singular="app",
        short_names=("rapp",),
        printer_columns=(
            objects.PrinterColumn(
                name="Phase",
                type="string",
                json_path=".status.phase",
                description="Pending, Running, Suspended or Failed.",
            ),
            objects.PrinterColumn(
                name="Partitions",
                type="integer",
                json_path=".status.partitions",
                description="Total partitions of the inputs.",
            ),
            objects.PrinterColumn(
                name="Executors",
                type="integer",
                json_path=".status.executors.ready",
                description="Executors registered with the driver.",
            ),
            objects.PrinterColumn(
                name="Desired",
                type="integer",
                json_path=".status.executors.desired",
                description="Executors the operator asks for.",
            ),
            objects.PrinterColumn(
                name="Lag",
                type="integer",
                json_path=".status.lag",
                description="Records behind the inputs.",
            ),
            objects.READY_COLUMN,
            objects.AGE_COLUMN,
        ),
    )

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (APP_NAME_FITS, EXECUTOR_ACCOUNT_IS_THE_DRIVERS)

    kind: Literal["App"] = Field(default="App", description="The kind: App.")
    spec: AppSpec = Field(description="The desired App.")
    status: AppStatus | None = Field(default=None, description="The observed App.")
