"""The App kind: a Spark Structured Streaming job from Kafka inputs to Topic and Table outputs.

An App reads its inputs as streaming views (one per input, named by `inputs[].name`), runs its
pipeline (Spark SQL over those views, or a Python function), and writes the results to Topics or
Tables. The operator runs the Spark driver, scales executors on Kafka lag between
`scaling.minExecutors` and `scaling.maxExecutors`, and reports progress in `status`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator

from rillet.api.v1alpha1 import conditions, fields, objects, rules

# Spark settings Rillet derives from the App (or from where it runs): a user value would be
# overwritten or would break the driver, so the apiserver refuses them.
RESERVED_SPARK_CONF = frozenset(
    {
        "spark.app.name",
        "spark.driver.bindAddress",
        "spark.driver.cores",
        "spark.driver.host",
        "spark.driver.memory",
        "spark.driver.port",
        "spark.executor.cores",
        "spark.executor.instances",
        "spark.executor.memory",
        "spark.jars",
        "spark.kubernetes.container.image",
        "spark.kubernetes.driver.container.image",
        "spark.kubernetes.driver.limit.cores",
        "spark.kubernetes.driver.pod.name",
        "spark.kubernetes.driver.request.cores",
        "spark.kubernetes.executor.container.image",
        "spark.kubernetes.executor.limit.cores",
        "spark.kubernetes.executor.podNamePrefix",
        "spark.kubernetes.executor.request.cores",
        "spark.kubernetes.namespace",
        "spark.master",
        "spark.sql.streaming.checkpointLocation",
        "spark.submit.deployMode",
    }
)
RESERVED_SPARK_CONF_PREFIXES = ("spark.dynamicAllocation.", "spark.kubernetes.authenticate.")

PYTHON_ENTRYPOINT_PATTERN = (
    r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
)
MAX_EXECUTORS = 1000

# An App's name prefixes its pods and names its driver Service: a DNS-1035 label, short enough
# for Spark's executor pod names (prefix + "-exec-<n>" within 63 characters).
APP_NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
APP_NAME_MAX_LENGTH = 47

StartingOffsets = Literal["earliest", "latest"]
OutputMode = Literal["append", "upsert"]
Phase = Literal["Pending", "Running", "Suspended", "Failed"]


def is_reserved_spark_conf(key: str) -> bool:
    """Whether Rillet owns the Spark setting `key` (see RESERVED_SPARK_CONF)."""
    return key in RESERVED_SPARK_CONF or key.startswith(RESERVED_SPARK_CONF_PREFIXES)


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


def _reserved(conf: Mapping[str, str]) -> list[str]:
    return [key for key in conf if is_reserved_spark_conf(key)]


_RESERVED_CEL = (
    f"(k in {rules.cel_list(RESERVED_SPARK_CONF)} || "
    f"{rules.cel_list(RESERVED_SPARK_CONF_PREFIXES)}.exists(p, k.startsWith(p)))"
)
_RESERVED_ADVICE = (
    "which Rillet manages: use the fields of the App instead (image, scaling, driver, executor, "
    "checkpoint)"
)
NO_RESERVED_SPARK_CONF = rules.Rule(
    rule=f"self.all(k, !{_RESERVED_CEL})",
    message=f"sparkConf sets a key {_RESERVED_ADVICE}",
    message_expression=(
        f"'sparkConf sets ' + self.filter(k, {_RESERVED_CEL})[0] + "
        f"{rules.cel_string(', ' + _RESERVED_ADVICE)}"
    ),
    check=lambda conf: not _reserved(conf),
    explain=lambda conf: f"sparkConf sets {_reserved(conf)[0]}, {_RESERVED_ADVICE}",
)


class ExternalTopic(objects.WireModel):
    """A Kafka topic that no Topic object manages (it must already exist)."""

    topic_name: fields.KafkaTopicName = Field(description="Name of the topic in Kafka.")


class Input(objects.WireModel):
    """A Kafka topic or Table the pipeline reads, exposed to it as a view named `name`.

    The view's columns depend on format: json gives the columns of `schema`; string gives `key`
    and `value` (STRING); bytes gives `key` and `value` (BINARY). Every view also has
    `timestamp`, `partition` and `offset`.
    """

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (
        rules.exactly_one(
            "topicRef",
            "tableRef",
            "external",
            message="an input needs exactly one of topicRef, tableRef or external: keep one",
        ),
        rules.Rule(
            rule="has(self.tableRef) || (has(self.format) && self.format != 'json') || "
            "has(self.schema)",
            message="schema is required for json topic inputs (format json is the default): "
            'give the columns as a Spark DDL string, e.g. "word STRING, n BIGINT"',
            field_path=".schema",
            reason="FieldValueRequired",
            check=lambda i: (
                i.table_ref is not None
                or (i.format is not None and i.format != "json")
                or i.schema_ is not None
            ),
        ),
        rules.Rule(
            rule="!has(self.schema) || !has(self.format) || self.format == 'json'",
            message="schema applies only to json inputs: remove it, or set format: json",
            field_path=".schema",
            check=lambda i: i.schema_ is None or i.format in {None, "json"},
        ),
    )

    name: fields.SqlIdentifier = Field(
        description="Name of the view the pipeline reads this input from (a SQL identifier, "
        "unique among the inputs).",
    )
    topic_ref: fields.LocalObjectReference | None = Field(
        default=None,
        description="Read the Kafka topic of this Topic object.",
    )
    table_ref: fields.LocalObjectReference | None = Field(
        default=None,
        description="Read this Table (its latest value per key) for lookups and joins.",
    )
    external: ExternalTopic | None = Field(
        default=None,
        description="Read a Kafka topic that no Topic object manages.",
    )
    format: fields.Format | None = Field(
        default=None,
        description="How record values are encoded: json, string or bytes. Defaults to json, or "
        "to the Table's valueFormat for a tableRef.",
    )
    schema_: fields.DdlSchema | None = Field(
        default=None,
        alias="schema",
        description="For json: the value's columns as a Spark DDL string, e.g. \"user STRING, "
        "ts TIMESTAMP\". Required for json topics; a Table's valueSchema otherwise.",
    )
    starting_offsets: StartingOffsets = Field(
        default="latest",
        description="Where a new App starts reading: earliest or latest. Ignored once the "
        "checkpoint holds offsets.",
    )


class PythonPipeline(objects.WireModel):
    """A pipeline written as a Python function shipped in the App's image."""

    entrypoint: Annotated[str, Field(max_length=512, pattern=PYTHON_ENTRYPOINT_PATTERN)] = Field(
        description='The function as "module:function", e.g. "clicks.pipeline:build". It is '
        "called with the SparkSession and a dict of the input views by name, and "
        "returns a DataFrame, or a dict of DataFrames by result name.",
    )


class Pipeline(objects.WireModel):
    """What the App computes: exactly one of sql or python."""

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (
        rules.exactly_one(
            "sql",
            "python",
            message="pipeline needs exactly one of sql or python: keep one",
        ),
    )

    sql: Annotated[str, Field(min_length=1, max_length=262144)] | None = Field(
        default=None,
        description="Spark SQL over the input views. Several statements may create temporary "
        "views; the last statement is the result, and outputs[].from can name views.",
    )
    python: PythonPipeline | None = Field(
        default=None,
        description="A Python function from the App's image.",
    )


class Output(objects.WireModel):
    """Where a result of the pipeline is written: a Topic (records) or a Table (upserts by key)."""

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (
        rules.exactly_one(
            "topicRef",
            "tableRef",
            message="an output needs exactly one of topicRef or tableRef: keep one",
        ),
        rules.Rule(
            rule="!has(self.tableRef) || !has(self.mode) || self.mode == 'upsert'",
            message="mode of a tableRef output must be upsert (a Table keeps the latest value per "
            "key): remove mode or set it to upsert",
            field_path=".mode",
            check=lambda o: o.table_ref is None or o.mode in {None, "upsert"},
        ),
        rules.Rule(
            rule="(!has(self.tableRef) && (!has(self.mode) || self.mode != 'upsert')) || "
            "(has(self.keyColumns) && self.keyColumns.size() > 0)",
            message="keyColumns is required for tableRef outputs and upsert mode (records are "
            "keyed by them): list the key columns",
            field_path=".keyColumns",
            reason="FieldValueRequired",
            check=lambda o: (o.table_ref is None and o.mode != "upsert") or bool(o.key_columns),
        ),
    )

    topic_ref: fields.LocalObjectReference | None = Field(
        default=None,
        description="Write records to the Kafka topic of this Topic object.",
    )
    table_ref: fields.LocalObjectReference | None = Field(
        default=None,
        description="Upsert into this Table, keyed by keyColumns.",
    )
    from_: fields.SqlIdentifier | None = Field(
        default=None,
        alias="from",
        description="Which result to write when the pipeline has several: a view name of the SQL "
        "or a result name of the Python function. Defaults to the single result.",
    )
    key_columns: Annotated[list[fields.ColumnName], Field(max_length=32)] | None = Field(
        default=None,
        description="Columns that form the record key (JSON-encoded when several). Absent: "
        "records have no key. Required for Tables and upsert.",
    )
    value_columns: (
        Annotated[list[fields.ColumnName], Field(min_length=1, max_length=1024)] | None
    ) = Field(
        default=None,
        description="Columns that form the record value (JSON-encoded). Defaults to all columns.",
    )
    mode: OutputMode | None = Field(
        default=None,
        description="append: every result row is a record; upsert: only the latest row per key "
        "counts (aggregations). Defaults to append for Topics, upsert for Tables.",
    )


class Scaling(objects.WireModel):
    """How many executors run the App, scaled on Kafka lag."""

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (
        rules.Rule(
            # Guarded: the apiserver checks the CRD's default ({}) before filling nested defaults.
            rule="!has(self.minExecutors) || !has(self.maxExecutors) || "
            "self.minExecutors <= self.maxExecutors",
            message="scaling.minExecutors must not exceed scaling.maxExecutors: lower "
            "minExecutors or raise maxExecutors",
            field_path=".minExecutors",
            check=lambda s: s.min_executors <= s.max_executors,
        ),
    )

    min_executors: Annotated[int, Field(ge=0, le=MAX_EXECUTORS)] = Field(
        default=1,
        description="Fewest executors, also when there is no lag (0 lets the driver alone run).",
    )
    max_executors: Annotated[int, Field(ge=1, le=MAX_EXECUTORS)] = Field(
        default=8,
        description="Most executors. More executors than input partitions would sit idle, so the "
        "operator also caps the count at the partition count.",
    )
    executor_cores: Annotated[int, Field(ge=1, le=64)] = Field(
        default=1,
        description="Task slots per executor (spark.executor.cores); one task reads one "
        "partition at a time.",
    )
    lag_target: Annotated[int, Field(ge=1)] = Field(
        default=1000,
        description="Records of lag each executor is expected to absorb: desired executors = "
        "total lag / lagTarget, within the bounds.",
    )
    stabilization_window_seconds: Annotated[int, Field(ge=0, le=3600)] = Field(
        default=60,
        description="Seconds a lower executor count must be wanted before scaling down.",
    )


class DriverResources(objects.WireModel):
    """CPU and memory of the Spark driver pod."""

    cpu: fields.CpuQuantity = Field(default="1", description='CPU request, e.g. "1" or "500m".')
    memory: fields.MemoryQuantity = Field(
        default="1Gi", description='Memory of the driver pod, e.g. "1Gi".'
    )


class ExecutorResources(objects.WireModel):
    """CPU and memory of each Spark executor pod."""

    cpu: fields.CpuQuantity | None = Field(
        default=None,
        description='CPU request, e.g. "2" or "1500m". Defaults to scaling.executorCores.',
    )
    memory: fields.MemoryQuantity = Field(
        default="2Gi", description='Memory of each executor pod, e.g. "2Gi".'
    )


class Checkpoint(objects.WireModel):
    """Where Spark keeps the App's offsets and state between restarts."""

    location: Annotated[str, Field(min_length=1, max_length=1024)] = Field(
        description="A directory: a path on a volume, or a URL such as s3a://bucket/apps/clicks. "
        "Changing it restarts the App from startingOffsets with empty state.",
    )


class Trigger(objects.WireModel):
    """When micro-batches run: exactly one of processingTime, availableNow or realTime."""

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (
        rules.exactly_one(
            "processingTime",
            "availableNow",
            "realTime",
            message="trigger needs exactly one of processingTime, availableNow or realTime: keep "
            "one (or remove trigger to run batches back to back)",
        ),
        rules.Rule(
            rule="!has(self.availableNow) || self.availableNow",
            message="trigger.availableNow can only be true: remove trigger to run continuously",
            field_path=".availableNow",
            check=lambda t: t.available_now in {None, True},
        ),
    )

    processing_time: fields.Duration | None = Field(
        default=None,
        description="Start a micro-batch every interval, e.g. 10s (0s: back to back).",
    )
    available_now: bool | None = Field(
        default=None,
        description="true: process what is available now, then stop (the App completes).",
    )
    real_time: Annotated[fields.Duration, fields.positive_duration("trigger.realTime")] | None = (
        Field(
            default=None,
            description="Spark real-time mode with this checkpoint interval, e.g. 5m: lowest "
            "latency, one long task per partition (needs a core per partition).",
        )
    )


class DeadLetter(objects.WireModel):
    """A Kafka topic for records the pipeline fails to process: exactly one of its fields."""

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (
        rules.exactly_one(
            "topicRef",
            "topicName",
            message="deadLetterTopic needs exactly one of topicRef or topicName: keep one",
        ),
    )

    topic_ref: fields.LocalObjectReference | None = Field(
        default=None, description="A Topic object in the same namespace."
    )
    topic_name: fields.KafkaTopicName | None = Field(
        default=None, description="A Kafka topic that no Topic object manages."
    )


class AppSpec(objects.WireModel):
    """The streaming job: inputs, pipeline, outputs, and how it runs."""

    image: Annotated[str, Field(min_length=1, max_length=1024)] = Field(
        description="Container image of the Spark driver and executors (with Rillet's runtime "
        "and, for python pipelines, the App's code).",
    )
    inputs: Annotated[list[Input], Field(min_length=1, max_length=16)] = Field(
        description="Kafka topics and Tables the pipeline reads, one view each.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
        },
    )
    pipeline: Pipeline = Field(description="What the App computes from its inputs.")

    @field_validator("inputs")
    @classmethod
    def _unique_input_names(cls, inputs: list[Input]) -> list[Input]:
        # The apiserver enforces this through the list's map keys (x-kubernetes-list-map-keys).
        names = [i.name for i in inputs]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"input names must be unique: {', '.join(duplicates)} is repeated")
        return inputs

    outputs: Annotated[list[Output], Field(min_length=1, max_length=16)] = Field(
        description="Topics and Tables the results are written to.",
    )
    scaling: Scaling = Field(
        default_factory=Scaling,
        description="Executor bounds and lag-based scaling.",
        json_schema_extra={"default": {}},
    )
    driver: DriverResources = Field(
        default_factory=DriverResources,
        description="Resources of the driver pod.",
        json_schema_extra={"default": {}},
    )
    executor: ExecutorResources = Field(
        default_factory=ExecutorResources,
        description="Resources of each executor pod.",
        json_schema_extra={"default": {}},
    )
    checkpoint: Checkpoint | None = Field(
        default=None,
        description="Where offsets and state are kept. Defaults to a per-App directory chosen "
        "by the operator.",
    )
    trigger: Trigger | None = Field(
        default=None,
        description="When micro-batches run. Absent: back to back, as soon as the last one ends.",
    )
    spark_conf: (
        Annotated[
            dict[str, Annotated[str, Field(max_length=4096)]],
            Field(max_length=128),
            NO_RESERVED_SPARK_CONF,
        ]
        | None
    ) = Field(
        default=None,
        description="Extra Spark settings, e.g. spark.sql.shuffle.partitions. Settings Rillet "
        "manages (spark.master, spark.executor.*, spark.kubernetes.namespace, ...) "
        "are refused.",
    )
    dead_letter_topic: DeadLetter | None = Field(
        default=None,
        description="Where records that fail to process go. Absent: a failure stops the App.",
    )
    suspend: bool = Field(
        default=False,
        description="true: stop the driver and executors, keeping the checkpoint; false: run.",
    )


class Executors(objects.WireModel):
    """Executor counts of the running App."""

    desired: int | None = Field(default=None, description="Executors the operator asks for.")
    ready: int | None = Field(default=None, description="Executors registered with the driver.")


class AppStatus(conditions.Status):
    """The App as last observed: where it runs, how big it is, how far behind."""

    phase: Phase | None = Field(
        default=None,
        description="Pending (starting), Running, Suspended (spec.suspend) or Failed.",
    )
    partitions: int | None = Field(
        default=None,
        description="Total partitions of the App's inputs: the most executor cores it can use.",
    )
    executors: Executors | None = Field(default=None, description="Executor counts.")
    lag: int | None = Field(
        default=None,
        description="Records behind the inputs' latest offsets, over all partitions.",
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

    cel_rules: ClassVar[tuple[rules.Rule, ...]] = (APP_NAME_FITS,)

    kind: Literal["App"] = Field(default="App", description="The kind: App.")
    spec: AppSpec = Field(description="The desired App.")
    status: AppStatus | None = Field(default=None, description="The observed App.")
