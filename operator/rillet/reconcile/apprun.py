"""Resolve an App and the Topics and Tables it names into the run spec its Spark driver executes.

This is a purely computational module: no I/O, no pyspark. The operator builds a `RunSpec` from
the objects it observes in the cluster and hands it to the driver as JSON; `rillet run` builds it
from a multi-document YAML file holding the App and its Topics and Tables. Either way the driver
only ever sees Kafka names, formats, schemas and numbers, never object references.

Naming decisions made here, in one place:
- the consumer group an App commits its processed offsets to is `rillet.<namespace>.<app>`;
- every output has a stable id (`table-<name>` or `topic-<name>`, plus `-<from>` when it names a
  result), which names its streaming query and its checkpoint sub-directory, so reordering the
  outputs of an App never mixes up checkpoints;
- `spark.sql.shuffle.partitions` (the number of state-store partitions of a stateful query) is the
  App's own sparkConf value when given, else the largest partition count of its output Tables,
  else of its input Topics. Spark freezes it in the checkpoint: changing it later has no effect
  until the checkpoint is discarded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from rillet.api.v1alpha1 import apps, fields, kinds, objects, tables, topics

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
CHECKPOINT_FILE_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
# Task scheduling of every App (see build_spark_conf), unless its sparkConf says otherwise.
SCHEDULING_DEFAULTS: Final[Mapping[str, str]] = {"spark.locality.wait": "0s"}
# How long a query running batches back to back waits, after finding no new record, before it
# asks Kafka again (Spark's default is 10 ms; see build_spark_conf).
POLLING_DELAY = "spark.sql.streaming.pollingDelay"
IDLE_POLLING_DELAY: Final = "250ms"
# Rillet's Spark defaults that a release may add or change without restarting running drivers
# (the spec hash skips them at these values): each takes effect at a driver's next start.
RESTART_FREE_DEFAULTS: Final[Mapping[str, str]] = {
    **SCHEDULING_DEFAULTS,
    POLLING_DELAY: IDLE_POLLING_DELAY,
}
DEFAULT_SHUFFLE_PARTITIONS = 8
DEFAULT_NAMESPACE = "default"
# A window is kept, accepting late records, this long after it starts unless the Table says.
DEFAULT_WINDOW_EXPIRY_MS = 24 * 3_600_000


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class WindowSpec(_Frozen):
    """A Table's time window, in milliseconds."""

    type: tables.WindowType
    size_ms: int
    step_ms: int | None = None
    expiry_ms: int


class KafkaLogin(_Frozen):
    """How the driver logs in to Kafka: the settings here, the credentials in the files of a
    Secret mounted at `credentials_dir` (username, password, ca.crt), never in the run spec."""

    security_protocol: Literal["SASL_PLAINTEXT", "SASL_SSL"]
    sasl_mechanism: Literal["SCRAM-SHA-256", "SCRAM-SHA-512"]
    credentials_dir: str
    ca: bool = Field(default=False, description="Whether the directory holds ca.crt.")


class EventTimeSpec(_Frozen):
    """An input's event-time column and allowed lateness (Spark's watermark delay)."""

    column: str
    allowed_lateness_ms: int


class LookupSpec(_Frozen):
    """A Table that a topic input's records look up by key (apps.Lookup)."""

    table: str = Field(description="The Table's input (its InputSpec's name).")
    key_columns: tuple[str, ...] = Field(description="The input's columns that form the key.")


class InputSpec(_Frozen):
    """One view of the pipeline: a Kafka topic read as a stream, or a Table read as its state."""

    name: str = Field(description="Name of the view (and of the DataFrame given to Python).")
    kind: Literal["topic", "table"]
    topic: str = Field(description="Kafka topic read (a Table's changelog topic for tables).")
    format: fields.Format = Field(description="Encoding of the record values.")
    value_schema: str | None = Field(default=None, description="Spark DDL of json values.")
    starting_offsets: apps.StartingOffsets = "latest"
    key_format: fields.Format = Field(default="string", description="Encoding of record keys.")
    window: WindowSpec | None = None
    broadcast: bool = Field(default=False, description="A global Table: broadcast in joins.")
    partitions: int | None = Field(default=None, description="Partitions, when known.")
    event_time: EventTimeSpec | None = Field(
        default=None, description="Where the watermark comes from (topic inputs)."
    )
    max_offsets_per_trigger: int | None = Field(
        default=None, description="Most records a micro-batch reads from this input."
    )
    lookups: tuple[LookupSpec, ...] = Field(
        default=(), description="Tables each record looks up (topic inputs)."
    )


class OutputSpec(_Frozen):
    """One streaming query: a result of the pipeline written to a Topic or upserted to a Table."""

    id: str = Field(description="Stable id: names the query and its checkpoint directory.")
    kind: Literal["topic", "table"]
    topic: str
    result: str | None = Field(default=None, description="The result (view) to write.")
    key_columns: tuple[str, ...] = ()
    value_columns: tuple[str, ...] | None = None
    mode: apps.OutputMode
    key_format: fields.Format = "string"
    value_format: fields.Format = "json"
    window: WindowSpec | None = None
    exactly_once: bool = Field(default=False, description="Written in Kafka transactions.")


class PipelineSpec(_Frozen):
    """The pipeline: Spark SQL statements, or a Python "module:function"."""

    sql: str | None = None
    python: str | None = None


class TriggerSpec(_Frozen):
    """When micro-batches run; all unset means back to back."""

    processing_time_ms: int | None = None
    available_now: bool = False
    real_time_ms: int | None = None


def back_to_back(trigger: TriggerSpec) -> bool:
    """Whether the App's batches run back to back: no trigger, or processingTime 0."""
    return not (trigger.available_now or trigger.real_time_ms or trigger.processing_time_ms)


class RunSpec(_Frozen):
    """Everything the driver of one App needs, with every reference resolved."""

    app: str
    namespace: str
    consumer_group: str
    bootstrap_servers: str
    kafka_config: dict[str, str] = Field(
        default_factory=dict,
        # The runtime adds the login's credentials here, in memory: never shown.
        repr=False,
        description="Extra Kafka client settings (librdkafka names), for Spark and "
        "confluent-kafka.",
    )
    kafka_login: KafkaLogin | None = None
    checkpoint_location: str
    checkpoint_on_loss: apps.CheckpointLossPolicy = Field(
        default="Stall", description="What the driver does when a Table's checkpoint is lost."
    )
    inputs: tuple[InputSpec, ...]
    pipeline: PipelineSpec
    outputs: tuple[OutputSpec, ...]
    dead_letter_topic: str | None = None
    dead_letter_exactly_once: bool = False
    trigger: TriggerSpec = TriggerSpec()
    shuffle_partitions: int
    spark_conf: dict[str, str] = Field(default_factory=dict)
    max_offsets_per_trigger: int | None = None

    @property
    def stream_inputs(self) -> tuple[InputSpec, ...]:
        """The inputs read as streams (topics), in order."""
        return tuple(i for i in self.inputs if i.kind == "topic")


class UnresolvedError(ValueError):
    """The App names objects that are not there (all of them are listed)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def consumer_group(*, namespace: str, app: str) -> str:
    """The Kafka consumer group an App commits its processed offsets to."""
    return f"rillet.{namespace}.{app}"


def topic_name(resource: topics.Topic | tables.Table) -> str:
    """The Kafka topic of a Topic or Table: spec.topicName, else metadata.name."""
    return resource.spec.topic_name or str(resource.metadata.name)


def build_window(window: tables.Window | None) -> WindowSpec | None:
    """A Table window in milliseconds, with the default expiry filled in."""
    if window is None:
        return None
    size = _ms(window.size)
    expiry = _ms(window.expiry) if window.expiry else max(size, DEFAULT_WINDOW_EXPIRY_MS)
    step = _ms(window.step) if window.step else None
    return WindowSpec(type=window.type, size_ms=size, step_ms=step, expiry_ms=expiry)


def _ms(duration: str) -> int:
    return int(fields.parse_duration(duration).total_seconds() * 1000)


def missing_references(
    app: apps.App,
    *,
    topics_by_name: Mapping[str, topics.Topic],
    tables_by_name: Mapping[str, tables.Table],
) -> list[str]:
    """What the App refers to but is not among the given objects, as readable phrases."""
    spec = app.spec
    wanted: list[tuple[str, str]] = [
        *(("Topic", i.topic_ref.name) for i in spec.inputs if i.topic_ref),
        *(("Table", i.table_ref.name) for i in spec.inputs if i.table_ref),
        *(("Topic", o.topic_ref.name) for o in spec.outputs if o.topic_ref),
        *(("Table", o.table_ref.name) for o in spec.outputs if o.table_ref),
    ]
    if spec.dead_letter_topic and spec.dead_letter_topic.topic_ref:
        wanted.append(("Topic", spec.dead_letter_topic.topic_ref.name))
    known = {"Topic": topics_by_name, "Table": tables_by_name}
    missing = dict.fromkeys(f"{kind} {name}" for kind, name in wanted if name not in known[kind])
    return [f"{item} not found" for item in missing]


def build_input(
    item: apps.Input,
    *,
    topics_by_name: Mapping[str, topics.Topic],
    tables_by_name: Mapping[str, tables.Table],
) -> InputSpec:
    """An input with its Kafka topic, format and schema resolved."""
    if item.table_ref is not None:
        return _table_input(item, tables_by_name[item.table_ref.name])
    if item.topic_ref is not None:
        topic = topics_by_name[item.topic_ref.name]
        name, partitions = topic_name(topic), topic.spec.partitions
    else:
        assert item.external is not None  # the model admits exactly one of the three
        name, partitions = item.external.topic_name, None
    return InputSpec(
        name=item.name,
        kind="topic",
        topic=name,
        format=item.format or "json",
        value_schema=item.schema_,
        starting_offsets=item.starting_offsets,
        partitions=partitions,
        event_time=_event_time(item.event_time),
        max_offsets_per_trigger=item.max_offsets_per_trigger,
        lookups=tuple(
            LookupSpec(table=lookup.table, key_columns=tuple(lookup.key_columns))
            for lookup in item.lookups or ()
        ),
    )


def _windowed_lookups(inputs: Iterable[InputSpec]) -> list[str]:
    """Lookups of windowed Tables: a key names no single value there (one per window)."""
    inputs = tuple(inputs)
    windowed = {i.name for i in inputs if i.kind == "table" and i.window is not None}
    return [
        f"input {item.name} looks up Table input {lookup.table}, which is windowed (a value per "
        f"window of each key): look up an unwindowed Table, or join the windows in the SQL"
        for item in inputs
        for lookup in item.lookups
        if lookup.table in windowed
    ]


def _event_time(event_time: apps.EventTime | None) -> EventTimeSpec | None:
    if event_time is None:
        return None
    return EventTimeSpec(
        column=event_time.column, allowed_lateness_ms=_ms(event_time.allowed_lateness)
    )


def _table_input(item: apps.Input, table: tables.Table) -> InputSpec:
    value_format = item.format or table.spec.value_format
    schema = item.schema_ or table.spec.value_schema
    if value_format == "json" and schema is None:
        raise UnresolvedError(
            [
                f"input {item.name}: Table {table.metadata.name} has no valueSchema; give the "
                f"input a schema"
            ]
        )
    return InputSpec(
        name=item.name,
        kind="table",
        topic=topic_name(table),
        format=value_format,
        value_schema=schema if value_format == "json" else None,
        starting_offsets="earliest",
        key_format=table.spec.key_format,
        window=build_window(table.spec.window),
        broadcast=table.spec.global_,
        partitions=table.spec.partitions,
    )


def build_output(
    item: apps.Output,
    *,
    topics_by_name: Mapping[str, topics.Topic],
    tables_by_name: Mapping[str, tables.Table],
) -> OutputSpec:
    """An output with its Kafka topic, encodings and mode resolved."""
    keys = tuple(item.key_columns or ())
    values = tuple(item.value_columns) if item.value_columns else None
    suffix = f"-{item.from_}" if item.from_ else ""
    if item.table_ref is not None:
        table = tables_by_name[item.table_ref.name]
        window = build_window(table.spec.window)
        return OutputSpec(
            id=f"table-{item.table_ref.name}{suffix}",
            kind="table",
            topic=topic_name(table),
            result=item.from_,
            key_columns=keys,
            value_columns=values,
            mode="upsert",
            key_format=_key_format(table.spec.key_format, keys, windowed=window is not None),
            value_format=table.spec.value_format,
            window=window,
        )
    assert item.topic_ref is not None  # the model admits exactly one of the two
    return OutputSpec(
        id=f"topic-{item.topic_ref.name}{suffix}",
        kind="topic",
        topic=topic_name(topics_by_name[item.topic_ref.name]),
        result=item.from_,
        key_columns=keys,
        value_columns=values,
        mode=item.mode or "append",
        key_format=_key_format(item.key_format or "string", keys, windowed=False),
        value_format=item.value_format or "json",
        exactly_once=item.delivery == "ExactlyOnce",
    )


def _key_format(declared: fields.Format, keys: tuple[str, ...], *, windowed: bool) -> fields.Format:
    """Several key columns, or a window in the key, are always JSON-encoded."""
    return "json" if len(keys) > 1 or windowed else declared


def build_trigger(trigger: apps.Trigger | None) -> TriggerSpec:
    """The App's trigger in milliseconds."""
    if trigger is None:
        return TriggerSpec()
    return TriggerSpec(
        processing_time_ms=_ms(trigger.processing_time) if trigger.processing_time else None,
        available_now=bool(trigger.available_now),
        real_time_ms=_ms(trigger.real_time) if trigger.real_time else None,
    )


def derive_shuffle_partitions(
    *,
    spark_conf: Mapping[str, str],
    inputs: Iterable[InputSpec],
    output_tables: Iterable[tables.Table],
) -> int:
    """State partitions: sparkConf, else the largest output Table, else the largest input Topic."""
    if SHUFFLE_PARTITIONS in spark_conf:
        return int(spark_conf[SHUFFLE_PARTITIONS])
    table_partitions = [t.spec.partitions for t in output_tables if t.spec.partitions]
    if table_partitions:
        return max(table_partitions)
    topic_partitions = [i.partitions for i in inputs if i.kind == "topic" and i.partitions]
    return max(topic_partitions, default=DEFAULT_SHUFFLE_PARTITIONS)


def build_run_spec(
    app: apps.App,
    *,
    topics_by_name: Mapping[str, topics.Topic],
    tables_by_name: Mapping[str, tables.Table],
    bootstrap_servers: str,
    checkpoint_location: str | None = None,
    namespace: str | None = None,
    kafka_config: Mapping[str, str] | None = None,
    kafka_login: KafkaLogin | None = None,
) -> RunSpec:
    """The run spec of `app`; raises UnresolvedError naming every missing object.

    `checkpoint_location` is where the operator (or `rillet run`) keeps the App's checkpoint when
    the App does not say; the App's own `checkpoint.location` wins. `namespace`, when given,
    wins over metadata.namespace (which a manifest file often leaves out).
    """
    problems = missing_references(app, topics_by_name=topics_by_name, tables_by_name=tables_by_name)
    if problems:
        raise UnresolvedError(problems)
    spec, name = app.spec, str(app.metadata.name)
    namespace = namespace or app.metadata.namespace or DEFAULT_NAMESPACE
    location = (spec.checkpoint and spec.checkpoint.location) or checkpoint_location
    if location is None:
        raise UnresolvedError(
            [f"App {name}: no checkpoint location (set spec.checkpoint.location)"]
        )
    inputs = tuple(
        build_input(i, topics_by_name=topics_by_name, tables_by_name=tables_by_name)
        for i in spec.inputs
    )
    windowed = _windowed_lookups(inputs)
    if windowed:
        raise UnresolvedError(windowed)
    outputs = tuple(
        build_output(o, topics_by_name=topics_by_name, tables_by_name=tables_by_name)
        for o in spec.outputs
    )
    _check_unique_outputs(outputs)
    spark_conf = dict(spec.spark_conf or {})
    return RunSpec(
        app=name,
        namespace=namespace,
        consumer_group=consumer_group(namespace=namespace, app=name),
        bootstrap_servers=bootstrap_servers,
        kafka_config=dict(kafka_config or {}),
        kafka_login=kafka_login,
        checkpoint_location=location,
        checkpoint_on_loss=spec.checkpoint.on_loss if spec.checkpoint else "Stall",
        inputs=inputs,
        pipeline=PipelineSpec(
            sql=spec.pipeline.sql,
            python=spec.pipeline.python.entrypoint if spec.pipeline.python else None,
        ),
        outputs=outputs,
        dead_letter_topic=_dead_letter_topic(spec, topics_by_name),
        dead_letter_exactly_once=bool(
            spec.dead_letter_topic and spec.dead_letter_topic.delivery == "ExactlyOnce"
        ),
        trigger=build_trigger(spec.trigger),
        shuffle_partitions=derive_shuffle_partitions(
            spark_conf=spark_conf,
            inputs=inputs,
            output_tables=[tables_by_name[o.table_ref.name] for o in spec.outputs if o.table_ref],
        ),
        spark_conf=spark_conf,
    )


def _check_unique_outputs(outputs: tuple[OutputSpec, ...]) -> None:
    ids = [o.id for o in outputs]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise UnresolvedError([f"outputs write the same result twice to {', '.join(repeated)}"])


def _dead_letter_topic(
    spec: apps.AppSpec, topics_by_name: Mapping[str, topics.Topic]
) -> str | None:
    dead_letter = spec.dead_letter_topic
    if dead_letter is None:
        return None
    if dead_letter.topic_ref is not None:
        return topic_name(topics_by_name[dead_letter.topic_ref.name])
    return dead_letter.topic_name


class Manifests(_Frozen):
    """The Rillet objects of a set of manifests, by kind and name."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    apps: dict[str, apps.App]
    topics: dict[str, topics.Topic]
    tables: dict[str, tables.Table]


def parse_manifests(documents: Iterable[Mapping[str, Any] | None]) -> Manifests:
    """The Apps, Topics and Tables among `documents` (parsed YAML), validated.

    Objects of other API groups (a ConfigMap in the same file, say) and empty documents (a
    trailing `---`) are ignored.
    """
    resources = [kinds.parse(d) for d in documents if d and _is_rillet(d)]
    return Manifests(
        apps={str(r.metadata.name): r for r in resources if isinstance(r, apps.App)},
        topics={str(r.metadata.name): r for r in resources if isinstance(r, topics.Topic)},
        tables={str(r.metadata.name): r for r in resources if isinstance(r, tables.Table)},
    )


def build_run_spec_from_manifests(
    documents: Iterable[Mapping[str, Any] | None],
    *,
    bootstrap_servers: str,
    app_name: str | None = None,
    checkpoint_location: str | None = None,
    namespace: str | None = None,
    kafka_config: Mapping[str, str] | None = None,
) -> RunSpec:
    """The run spec of the App among `documents` (parsed YAML manifests of Apps, Topics, Tables).

    With several Apps in the documents, `app_name` picks one.
    """
    found = parse_manifests(documents)
    return build_run_spec(
        pick_app(found, app_name),
        topics_by_name=found.topics,
        tables_by_name=found.tables,
        bootstrap_servers=bootstrap_servers,
        checkpoint_location=checkpoint_location,
        namespace=namespace,
        kafka_config=kafka_config,
    )


def table_in(documents: Iterable[Mapping[str, Any]], name: str) -> tables.Table:
    """The Table called `name` among `documents`; a ValueError lists the Tables otherwise."""
    found = parse_manifests(documents).tables
    if name not in found:
        raise ValueError(f"no Table {name!r} in the manifests (Tables: {', '.join(found) or '-'})")
    return found[name]


def _is_rillet(document: Mapping[str, Any]) -> bool:
    return str(document.get("apiVersion", "")).startswith(f"{objects.GROUP}/")


def pick_app(found: Manifests, name: str | None) -> apps.App:
    """The App called `name`, or the only App; a ValueError says what to pass otherwise."""
    names = list(found.apps)
    if name is not None:
        if name not in found.apps:
            raise ValueError(f"no App {name!r} in the manifests (Apps: {', '.join(names) or '-'})")
        return found.apps[name]
    if len(names) != 1:
        raise ValueError(
            f"the manifests hold {len(names)} Apps ({', '.join(names)}): name one with --app"
            if names
            else "the manifests hold no App"
        )
    return found.apps[names[0]]


# HotSpot's compile thresholds times 3: its JIT threads then compete less with a starting
# App's tasks for the cores. Measured on 2 cores (docs/runtime.md, "Starting"): the word count
# restarted to its first committed batch in 8.1 s instead of 8.9, caught up 1,000,000 lines
# in 9.3 to 9.8 s instead of 9.9 to 10.5, and ran 8% faster in steady state. Compiling
# earlier (0.1) or C1 only was slower.
JIT_OPTION: Final = "-XX:CompileThresholdScaling=3"
# The parallel collector rather than G1: a micro-batch wants throughput, its state lives off
# the heap (RocksDB), and G1's concurrent work takes a core a task could use. Measured on 2
# cores (docs/runtime.md, "Starting"): the word count catching up on 2,000,000 lines ran 3 to
# 11% faster in steady state. A JVM with one core (a small executor) picks the serial
# collector by itself; this one is the serial one's parallel form.
GC_OPTION: Final = "-XX:+UseParallelGC"
_COLLECTOR: Final = re.compile(r"-XX:\+Use\w+GC\b")
JVM_ROLES: Final = ("driver", "executor")


def jvm_defaults(spark_conf: Mapping[str, str]) -> dict[str, str]:
    """The defaultJavaOptions of the App's driver and executors: JIT_OPTION and GC_OPTION,
    without GC_OPTION for a JVM whose extraJavaOptions in the App's sparkConf choose a collector
    (a JVM given two collectors does not start). The App's own defaultJavaOptions replace these.
    """
    defaults = {}
    for role in JVM_ROLES:
        own = spark_conf.get(f"spark.{role}.extraJavaOptions", "")
        options = [JIT_OPTION] if _COLLECTOR.search(own) else [JIT_OPTION, GC_OPTION]
        defaults[f"spark.{role}.defaultJavaOptions"] = " ".join(options)
    return defaults


# Classes a task would otherwise initialize inside the App's first batch, by what in the
# pipeline's SQL reaches them; the warm-up plugin (runtime/jvm/WarmupPlugin.java) initializes
# them as each JVM starts. Spark's ICU case mappings (lower, upper, initcap) build a table over
# every Unicode code point first: about 1 s of one core in the word count's first batch. Only
# what the SQL names: on two cores that second costs a scaling executor's first tasks when
# nothing uses it. A Python pipeline's functions cannot be read here, so it gets none.
WARMUP_CLASSES_KEY: Final = "spark.rillet.warmup.classes"
_WARMUPS: Final = (
    (
        re.compile(r"\b(lower|lcase|upper|ucase|initcap)\s*\(", re.IGNORECASE),
        "org.apache.spark.sql.catalyst.util.CollationAwareUTF8String",
    ),
)


def warmup_classes(spec: RunSpec) -> list[str]:
    """The classes the App's JVMs initialize as they start (WARMUP_CLASSES_KEY)."""
    sql = spec.pipeline.sql or ""
    return [name for pattern, name in _WARMUPS if pattern.search(sql)]


def build_spark_conf(spec: RunSpec) -> dict[str, str]:
    """The Spark settings the App's driver runs with (besides master, jars and deploy settings).

    RocksDB with changelog checkpointing keeps large state off the JVM heap and uploads only the
    changes at each batch. The App's sparkConf comes last and wins (it cannot name the keys Rillet
    reserves: the API refuses them).

    Checkpoint files go through Hadoop's FileSystem API rather than Spark's default FileContext
    for local paths (a volume): without Hadoop's native library, FileContext's rename runs a
    `readlink` process per file, several per batch, which cost a stateful micro-batch ~200 ms
    of its ~550. FileSystem renames are atomic on local disks and HDFS; object stores use this
    manager anyway.

    Tasks never wait for a busy executor they prefer (`spark.locality.wait` 0): a Kafka read
    prefers the executor whose consumer it used last, so Spark's default 3 s per locality level,
    reset each time that executor starts one of them, kept a burst's tasks queued on the one
    executor that was running while new executors sat idle (measured: the new ones got tasks
    12 s after they joined). With no wait an idle executor still takes the tasks that prefer it
    first: in steady state (one task per partition, no more tasks than cores) every task runs
    where it ran before, and state stores stay put.

    An idle query running batches back to back asks Kafka for its inputs' ends every
    IDLE_POLLING_DELAY, not every 10 ms (Spark's default): on an idle word count the driver
    used 0.41 cores and the broker 0.14 (ListOffsets a hundred times a second per query); at
    250 ms, 0.07 and 0.03 (`bench/pipeline.py --only idle`). A record that arrives at an idle
    query waits for it up to that long, under Kafka's own default fetch.max.wait.ms (500 ms);
    batches of a busy query follow each other at once as before. A processingTime trigger
    already paces the polls, and its own interval is the App's choice: the delay is left to
    Spark there.

    The JVMs compile hot code later than HotSpot's defaults and collect with the parallel
    collector (jvm_defaults), in Spark's defaultJavaOptions, which come before the App's own
    extraJavaOptions (whose flags win).
    They initialize the classes of warmup_classes as they start.
    """
    warmups = warmup_classes(spec)
    return {
        "spark.app.name": consumer_group(namespace=spec.namespace, app=spec.app),
        **SCHEDULING_DEFAULTS,
        **({POLLING_DELAY: IDLE_POLLING_DELAY} if back_to_back(spec.trigger) else {}),
        **jvm_defaults(spec.spark_conf),
        **({WARMUP_CLASSES_KEY: ",".join(warmups)} if warmups else {}),
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_FILE_MANAGER,
        "spark.sql.session.timeZone": "UTC",
        **spec.spark_conf,
        SHUFFLE_PARTITIONS: str(spec.shuffle_partitions),
    }


def output_checkpoint(spec: RunSpec, output: OutputSpec) -> str:
    """Checkpoint directory of an output's query."""
    return f"{spec.checkpoint_location.rstrip('/')}/outputs/{output.id}"


def dead_letter_checkpoint(spec: RunSpec, item: InputSpec) -> str:
    """Checkpoint directory of the query routing an input's bad records to the dead-letter topic."""
    return f"{spec.checkpoint_location.rstrip('/')}/dead-letters/{item.name}"
