"""Option dicts of Spark's Kafka source and sink, triggers and output modes.

Test plan:
- the stream reader subscribes to the input's topic from its starting offsets, with the App's
  Kafka settings prefixed for Spark, and maxOffsetsPerTrigger only when the input or the
  command line sets it (the command line wins);
- a Table is read as a batch from earliest to latest;
- triggers map to DataStreamWriter.trigger arguments; upserts use Spark's update mode.
"""

from __future__ import annotations

from rillet.driverapi import runspecs
from rillet.runtime.queries import options

INPUT = runspecs.InputSpec(
    name="clicks",
    kind="topic",
    topic="web.clicks",
    format="json",
    value_schema="page STRING",
    starting_offsets="earliest",
)


def _spec(**fields: object) -> runspecs.RunSpec:
    base: dict[str, object] = {
        "app": "clicks",
        "namespace": "web",
        "consumer_group": "rillet.web.clicks",
        "bootstrap_servers": "kafka:9092",
        "checkpoint_location": "/ck",
        "inputs": [INPUT],
        "pipeline": {"sql": "SELECT 1"},
        "outputs": [],
        "shuffle_partitions": 4,
        "kafka_config": {"security.protocol": "SSL"},
    }
    return runspecs.RunSpec.model_validate({**base, **fields})


def test_stream_reader_subscribes_from_the_starting_offsets() -> None:
    assert options.stream_reader_options(_spec(), INPUT) == {
        "kafka.bootstrap.servers": "kafka:9092",
        "kafka.security.protocol": "SSL",
        "subscribe": "web.clicks",
        "startingOffsets": "earliest",
        "kafka.fetch.max.wait.ms": "10",
        "kafka.max.partition.fetch.bytes": "8388608",
        "kafka.max.poll.records": "10000",
        "groupIdPrefix": "rillet.web.clicks.spark",
    }


def test_max_offsets_per_trigger_is_the_inputs_unless_the_command_line_overrides_it() -> None:
    own = INPUT.model_copy(update={"max_offsets_per_trigger": 2000})

    assert options.stream_reader_options(_spec(), own)["maxOffsetsPerTrigger"] == "2000"
    limited = options.stream_reader_options(_spec(max_offsets_per_trigger=500), own)
    assert limited["maxOffsetsPerTrigger"] == "500"
    assert (
        options.stream_reader_options(_spec(max_offsets_per_trigger=500), INPUT)[
            "maxOffsetsPerTrigger"
        ]
        == "500"
    )


def test_the_apps_kafka_config_wins_over_the_source_defaults() -> None:
    tuned = _spec(kafka_config={"max.poll.records": "500", "fetch.max.wait.ms": "100"})

    found = options.stream_reader_options(tuned, INPUT)

    assert (found["kafka.max.poll.records"], found["kafka.fetch.max.wait.ms"]) == ("500", "100")


def test_table_reader_reads_everything_up_to_now() -> None:
    table = INPUT.model_copy(update={"kind": "table", "topic": "customers"})

    found = options.table_reader_options(_spec(), table)

    assert (found["subscribe"], found["startingOffsets"], found["endingOffsets"]) == (
        "customers",
        "earliest",
        "latest",
    )


def test_writer_targets_the_topic() -> None:
    assert options.writer_options(_spec(), topic="out") == {
        "kafka.bootstrap.servers": "kafka:9092",
        "kafka.security.protocol": "SSL",
        "topic": "out",
    }


def test_triggers() -> None:
    assert options.trigger_kwargs(runspecs.TriggerSpec()) == {}
    assert options.trigger_kwargs(runspecs.TriggerSpec(available_now=True)) == {
        "availableNow": True
    }
    assert options.trigger_kwargs(runspecs.TriggerSpec(processing_time_ms=30_000)) == {
        "processingTime": "30000 milliseconds"
    }
    assert options.trigger_kwargs(runspecs.TriggerSpec(real_time_ms=300_000)) == {
        "realTime": "300000 milliseconds"
    }


def test_output_modes_and_query_names() -> None:
    upsert = runspecs.OutputSpec(id="table-t", kind="table", topic="t", mode="upsert")
    append = upsert.model_copy(update={"mode": "append"})

    micro, real_time = runspecs.TriggerSpec(), runspecs.TriggerSpec(real_time_ms=1000)
    assert options.output_mode(upsert, micro) == "update"
    assert options.output_mode(append, micro) == "append"
    assert options.output_mode(None, micro) == "append"  # dead letters
    assert options.output_mode(append, real_time) == "update"  # the only mode it accepts
    assert options.query_name(_spec(), "table-t") == "clicks.table-t"
