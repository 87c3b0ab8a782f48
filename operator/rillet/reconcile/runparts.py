"""Pure: the parts of an App's run spec, each resolved from its own declaration: an input or an
output (its Kafka topic, format, schema, key encoding, window, lookups), a Table's window, the
trigger, all durations in milliseconds.

`runresolving` checks the App as a whole (its references, its checkpoint, its streams together)
and gathers these parts into the `runspecs.RunSpec` its driver executes. `UnresolvedError` is
what either raises for an App that cannot run; `topic_name` is the Kafka topic of a Topic or
Table, as every part and `rillet table` name it.
"""

from __future__ import annotations

from collections.abc import Mapping

from rillet.api.v1alpha1 import appflows, appoutputs, appresources, fields, tables, topics
from rillet.driverapi import runspecs
from rillet.reconcile import avrospecs, protospecs

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
