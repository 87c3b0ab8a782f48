"""A standby driver: which checkpoints it can lock, and what its warm-up reads and writes.

Test plan:
- a local path or file: URL (with a host, or escapes) is locked in its own directory; an
  object-store URL is not;
- the warm-up reads one batch of at most WARM_UP_RECORDS records per query from the start of
  each topic input (whatever the App's own startingOffsets, limit or trigger), Tables as they
  are, and keeps every checkpoint under its scratch directory, never the App's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rillet.driverapi import runspecs
from rillet.runtime.driver import driverlock, warmup
from rillet.runtime.queries import options

CLICKS = runspecs.InputSpec(
    name="clicks",
    kind="topic",
    topic="web.clicks",
    format="string",
    starting_offsets="latest",
    max_offsets_per_trigger=50_000,
)
PAGES = runspecs.InputSpec(name="pages", kind="table", topic="web.pages", format="string")
COUNTS = runspecs.OutputSpec(
    id="table-counts", kind="table", topic="web.counts", result="counts", mode="upsert"
)


def _spec() -> runspecs.RunSpec:
    return runspecs.RunSpec(
        app="clicks",
        namespace="web",
        consumer_group="rillet.web.clicks",
        bootstrap_servers="kafka:9092",
        checkpoint_location="/checkpoint/clicks",
        inputs=(CLICKS, PAGES),
        pipeline=runspecs.PipelineSpec(sql="SELECT 1"),
        outputs=(COUNTS,),
        shuffle_partitions=4,
        trigger=runspecs.TriggerSpec(processing_time_ms=500),
    )


@pytest.mark.parametrize(
    ("location", "directory"),
    [
        ("/checkpoint/clicks", Path("/checkpoint/clicks")),
        (".rillet/checkpoints/web/clicks", Path(".rillet/checkpoints/web/clicks")),
        ("file:///checkpoint/clicks", Path("/checkpoint/clicks")),
        ("file:/checkpoint/clicks", Path("/checkpoint/clicks")),
        ("file://localhost/checkpoint/clicks", Path("/checkpoint/clicks")),
        ("file:///check%20points/clicks", Path("/check points/clicks")),
        ("s3a://bucket/checkpoints/clicks", None),
        ("gs://bucket/clicks", None),
    ],
)
def test_only_a_local_checkpoint_is_locked(location: str, directory: Path | None) -> None:
    assert driverlock.local_directory(location) == directory


def test_the_warm_up_reads_one_small_batch_from_the_start_of_each_topic() -> None:
    warm = warmup.warm_spec(_spec(), "/tmp/rillet-warm-up-x")
    clicks, pages = warm.inputs

    reader = options.stream_reader_options(warm, clicks)
    assert reader["startingOffsets"] == "earliest"
    assert reader["maxOffsetsPerTrigger"] == str(warmup.WARM_UP_RECORDS)
    assert pages == PAGES
    # The first batch at once, the next an hour later: it is stopped in between.
    assert options.trigger_kwargs(warm.trigger) == {
        "processingTime": f"{warmup.ONE_BATCH_MS} milliseconds"
    }


def test_the_warm_up_never_touches_the_apps_checkpoint() -> None:
    warm = warmup.warm_spec(_spec(), "/tmp/rillet-warm-up-x")

    assert runspecs.output_checkpoint(warm, COUNTS) == "/tmp/rillet-warm-up-x/outputs/table-counts"
