"""Resolve an App and the Topics and Tables it names into the run spec its Spark driver executes.

This is a purely computational module: no I/O, no pyspark. The operator builds a run spec
(`driverapi.runspecs.RunSpec`) from the objects it observes in the cluster and hands it to the
driver as JSON; `rillet run` builds it from a multi-document YAML file holding the App and its
Topics and Tables (`manifests`). Either way the driver only ever sees Kafka names, formats,
schemas and numbers, never object references.

Naming decisions made here, in one place:
- the consumer group an App commits its processed offsets to is `rillet.<namespace>.<app>`
  (`naming.consumer_group`);
- every output has a stable id (`table-<name>` or `topic-<name>`, plus `-<from>` when it names a
  result), which names its streaming query and its checkpoint sub-directory, so reordering the
  outputs of an App never mixes up checkpoints;
- `spark.sql.shuffle.partitions` (the number of state-store partitions of a stateful query) is the
  App's own sparkConf value when given, else the largest partition count of its output Tables,
  else of its input Topics. Spark freezes it in the checkpoint: changing it later has no effect
  until the checkpoint is discarded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rillet.api.v1alpha1 import appflows, appoutputs, appresources, apps, fields, tables, topics
from rillet.driverapi import runspecs
from rillet.reconcile import avrospecs, naming, protospecs, sparkdefaults

DEFAULT_SHUFFLE_PARTITIONS = 8
DEFAULT_NAMESPACE = "default"
# A window is kept, accepting late records, this long after it starts unless the Table says.
DEFAULT_WINDOW_EXPIRY_MS = 24 * 3_600_000


class UnresolvedError(ValueError):
    """The App names objects that are not there (all of them are listed)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def topic_name(resource: topics.Topic | tables.Table) -> str:
    """The Kafka topic of a Topic or Table: spec.topicName, else metadata.name."""
    return resource.spec.topic_name or str(resource.metadata.name)


def build_window(window: tables.Window | None) -> runspecs.WindowSpec | None:
    """A Table window in milliseconds, with the default expiry filled in."""
    if window is None:
        return None
    size = _ms(window.size)
    expiry = _ms(window.expiry) if window.expiry else max(size, DEFAULT_WINDOW_EXPIRY_MS)
    step = _ms(window.step) if window.step else None
    return runspecs.WindowSpec(type=window.type, size_ms=size, step_ms=step, expiry_ms=expiry)


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
    item: appflows.Input,
    *,
    topics_by_name: Mapping[str, topics.Topic],
    tables_by_name: Mapping[str, tables.Table],
) -> runspecs.InputSpec:
    """An input with its Kafka topic, format and schema resolved."""
    if item.table_ref is not None:
        return _table_input(item, tables_by_name[item.table_ref.name])
    if item.topic_ref is not None:
        topic = topics_by_name[item.topic_ref.name]
        name, partitions = topic_name(topic), topic.spec.partitions
    else:
        assert item.external is not None  # the model admits exactly one of the three
        name, partitions = item.external.topic_name, None
    return runspecs.InputSpec(
        name=item.name,
        kind="topic",
        topic=name,
        format=item.format or "json",
        value_schema=item.schema_,
        avro=(
            avrospecs.avro_spec(item.avro, topic=name, part="value")
            if item.format == "avro"
            else None
        ),
        protobuf=(
            protospecs.protobuf_spec(item.protobuf, topic=name, part="value")
            if item.format == "protobuf"
            else None
        ),
        starting_offsets=item.starting_offsets,
        partitions=partitions,
        event_time=_event_time(item.event_time),
        max_offsets_per_trigger=item.max_offsets_per_trigger,
        lookups=tuple(
            runspecs.LookupSpec(table=lookup.table, key_columns=tuple(lookup.key_columns))
            for lookup in item.lookups or ()
        ),
    )


def _windowed_lookups(inputs: Iterable[runspecs.InputSpec]) -> list[str]:
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


def _event_time(event_time: appflows.EventTime | None) -> runspecs.EventTimeSpec | None:
    if event_time is None:
        return None
    return runspecs.EventTimeSpec(
        column=event_time.column, allowed_lateness_ms=_ms(event_time.allowed_lateness)
    )


def _table_input(item: appflows.Input, table: tables.Table) -> runspecs.InputSpec:
    value_format = item.format or table.spec.value_format
    schema = item.schema_ or table.spec.value_schema
    if value_format == "json" and schema is None:
        raise UnresolvedError(
            [
                f"input {item.name}: Table {table.metadata.name} has no valueSchema; give the "
                f"input a schema"
            ]
        )
    changelog = topic_name(table)
    return runspecs.InputSpec(
        name=item.name,
        kind="table",
        topic=changelog,
        format=value_format,
        value_schema=schema if value_format == "json" else None,
        avro=(
            avrospecs.avro_spec(item.avro or table.spec.value_avro, topic=changelog, part="value")
            if value_format == "avro"
            else None
        ),
        protobuf=(
            protospecs.protobuf_spec(
                item.protobuf or table.spec.value_protobuf, topic=changelog, part="value"
            )
            if value_format == "protobuf"
            else None
        ),
        starting_offsets="earliest",
        key_format=table.spec.key_format,
        window=build_window(table.spec.window),
        broadcast=table.spec.global_,
        partitions=table.spec.partitions,
    )


def build_output(
    item: appoutputs.Output,
    *,
    topics_by_name: Mapping[str, topics.Topic],
    tables_by_name: Mapping[str, tables.Table],
) -> runspecs.OutputSpec:
    """An output with its Kafka topic, encodings and mode resolved."""
    keys = tuple(item.key_columns or ())
    values = tuple(item.value_columns) if item.value_columns else None
    suffix = f"-{item.from_}" if item.from_ else ""
    if item.table_ref is not None:
        table = tables_by_name[item.table_ref.name]
        window = build_window(table.spec.window)
        changelog = topic_name(table)
        return runspecs.OutputSpec(
            id=f"table-{item.table_ref.name}{suffix}",
            kind="table",
            topic=changelog,
            result=item.from_,
            key_columns=keys,
            value_columns=values,
            mode="upsert",
            key_format=_key_format(table.spec.key_format, keys, windowed=window is not None),
            value_format=table.spec.value_format,
            value_avro=(
                avrospecs.avro_spec(table.spec.value_avro, topic=changelog, part="value")
                if table.spec.value_format == "avro"
                else None
            ),
            value_protobuf=(
                protospecs.protobuf_spec(table.spec.value_protobuf, topic=changelog, part="value")
                if table.spec.value_format == "protobuf"
                else None
            ),
            window=window,
        )
    assert item.topic_ref is not None  # the model admits exactly one of the two
    topic = topic_name(topics_by_name[item.topic_ref.name])
    key_format = _key_format(item.key_format or "string", keys, windowed=False)
    return runspecs.OutputSpec(
        id=f"topic-{item.topic_ref.name}{suffix}",
        kind="topic",
        topic=topic,
        result=item.from_,
        key_columns=keys,
        value_columns=values,
        mode=item.mode or "append",
        key_format=key_format,
        value_format=item.value_format or "json",
        key_avro=(
            avrospecs.avro_spec(item.key_avro, topic=topic, part="key")
            if key_format == "avro"
            else None
        ),
        value_avro=(
            avrospecs.avro_spec(item.value_avro, topic=topic, part="value")
            if item.value_format == "avro"
            else None
        ),
        key_protobuf=(
            protospecs.protobuf_spec(item.key_protobuf, topic=topic, part="key")
            if key_format == "protobuf"
            else None
        ),
        value_protobuf=(
            protospecs.protobuf_spec(item.value_protobuf, topic=topic, part="value")
            if item.value_format == "protobuf"
            else None
        ),
        exactly_once=item.delivery == "ExactlyOnce",
    )


def _key_format(declared: fields.Format, keys: tuple[str, ...], *, windowed: bool) -> fields.Format:
    """Several key columns, or a window in the key, are JSON-encoded unless Avro or Protobuf
    is asked for."""
    if declared in ("avro", "protobuf"):
        return declared
    return "json" if len(keys) > 1 or windowed else declared


def build_trigger(trigger: appresources.Trigger | None) -> runspecs.TriggerSpec:
    """The App's trigger in milliseconds."""
    if trigger is None:
        return runspecs.TriggerSpec()
    return runspecs.TriggerSpec(
        processing_time_ms=_ms(trigger.processing_time) if trigger.processing_time else None,
        available_now=bool(trigger.available_now),
        real_time_ms=_ms(trigger.real_time) if trigger.real_time else None,
    )


def derive_shuffle_partitions(
    *,
    spark_conf: Mapping[str, str],
    inputs: Iterable[runspecs.InputSpec],
    output_tables: Iterable[tables.Table],
) -> int:
    """State partitions: sparkConf, else the largest output Table, else the largest input Topic."""
    if sparkdefaults.SHUFFLE_PARTITIONS in spark_conf:
        return int(spark_conf[sparkdefaults.SHUFFLE_PARTITIONS])
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
    kafka_login: runspecs.KafkaLogin | None = None,
    schema_registry: runspecs.SchemaRegistry | None = None,
) -> runspecs.RunSpec:
    """The run spec of `app`; raises UnresolvedError naming every missing object.

    `checkpoint_location` is where the operator (or `rillet run`) keeps the App's checkpoint when
    the App does not say; the App's own `checkpoint.location` wins. `namespace`, when given,
    wins over metadata.namespace (which a manifest file often leaves out). `schema_registry`
    goes into the run spec only when the App reads or writes Avro or Protobuf.
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
    inputs, outputs = _build_streams(
        spec, topics_by_name=topics_by_name, tables_by_name=tables_by_name
    )
    registry_problems = [
        *avrospecs.problems(inputs, outputs, registry=schema_registry),
        *protospecs.problems(inputs, outputs, registry=schema_registry),
    ]
    if registry_problems:
        raise UnresolvedError(registry_problems)
    spark_conf = dict(spec.spark_conf or {})
    return runspecs.RunSpec(
        app=name,
        namespace=namespace,
        consumer_group=naming.consumer_group(namespace=namespace, app=name),
        bootstrap_servers=bootstrap_servers,
        kafka_config=dict(kafka_config or {}),
        kafka_login=kafka_login,
        # Only for Avro and Protobuf: the run spec is hashed into the driver's pod template, so a
        # registry set or moved would otherwise restart every App, those that never ask it too.
        schema_registry=schema_registry if protospecs.uses_registry(inputs, outputs) else None,
        checkpoint_location=location,
        checkpoint_on_loss=spec.checkpoint.on_loss if spec.checkpoint else "Stall",
        inputs=inputs,
        pipeline=runspecs.PipelineSpec(
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


def _build_streams(
    spec: apps.AppSpec,
    *,
    topics_by_name: Mapping[str, topics.Topic],
    tables_by_name: Mapping[str, tables.Table],
) -> tuple[tuple[runspecs.InputSpec, ...], tuple[runspecs.OutputSpec, ...]]:
    """The App's inputs and outputs, resolved; UnresolvedError for what cannot run."""
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
    return inputs, outputs


def _check_unique_outputs(outputs: tuple[runspecs.OutputSpec, ...]) -> None:
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
