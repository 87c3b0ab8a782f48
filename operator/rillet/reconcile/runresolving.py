"""Resolve an App and the Topics and Tables it names into the run spec its Spark driver executes.

This is a purely computational module: no I/O, no pyspark. The operator builds a run spec
(`driverapi.runspecs.RunSpec`) from the objects it observes in the cluster and hands it to the
driver as JSON; `rillet run` builds it from a multi-document YAML file holding the App and its
Topics and Tables (`manifests`). Either way the driver only ever sees Kafka names, formats,
schemas and numbers, never object references.

This module takes the App as a whole: its references, checkpoint location, schema registry,
streams together, dead-letter topic and state partitions. Each input and output, a Table's
window and the trigger are resolved on their own by `runparts`.

Naming decisions made here and in `runparts` (output ids), nowhere else:
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

from rillet.api.v1alpha1 import apps, tables, topics
from rillet.driverapi import runspecs
from rillet.reconcile import avrospecs, naming, protospecs, runparts, sparkdefaults

DEFAULT_SHUFFLE_PARTITIONS = 8
DEFAULT_NAMESPACE = "default"


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
    """The run spec of `app`; raises `runparts.UnresolvedError` naming every missing object.

    `checkpoint_location` is where the operator (or `rillet run`) keeps the App's checkpoint when
    the App does not say; the App's own `checkpoint.location` wins. `namespace`, when given,
    wins over metadata.namespace (which a manifest file often leaves out). `schema_registry`
    goes into the run spec only when the App reads or writes Avro or Protobuf.
    """
    problems = missing_references(app, topics_by_name=topics_by_name, tables_by_name=tables_by_name)
    if problems:
        raise runparts.UnresolvedError(problems)
    spec, name = app.spec, str(app.metadata.name)
    namespace = namespace or app.metadata.namespace or DEFAULT_NAMESPACE
    location = (spec.checkpoint and spec.checkpoint.location) or checkpoint_location
    if location is None:
        raise runparts.UnresolvedError(
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
        raise runparts.UnresolvedError(registry_problems)
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
        trigger=runparts.build_trigger(spec.trigger),
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
        runparts.build_input(i, topics_by_name=topics_by_name, tables_by_name=tables_by_name)
        for i in spec.inputs
    )
    windowed = _windowed_lookups(inputs)
    if windowed:
        raise runparts.UnresolvedError(windowed)
    outputs = tuple(
        runparts.build_output(o, topics_by_name=topics_by_name, tables_by_name=tables_by_name)
        for o in spec.outputs
    )
    _check_unique_outputs(outputs)
    return inputs, outputs


def _check_unique_outputs(outputs: tuple[runspecs.OutputSpec, ...]) -> None:
    ids = [o.id for o in outputs]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise runparts.UnresolvedError(
            [f"outputs write the same result twice to {', '.join(repeated)}"]
        )


def _dead_letter_topic(
    spec: apps.AppSpec, topics_by_name: Mapping[str, topics.Topic]
) -> str | None:
    dead_letter = spec.dead_letter_topic
    if dead_letter is None:
        return None
    if dead_letter.topic_ref is not None:
        return runparts.topic_name(topics_by_name[dead_letter.topic_ref.name])
    return dead_letter.topic_name
