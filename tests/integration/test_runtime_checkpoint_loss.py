"""A lost checkpoint is never silent (real Kafka and Spark, the driver in this process).

Test plan (a word count upserting into a Table; the checkpoint directory deleted while the Table
holds counts; words a a b, then a c after the loss):
- with checkpoint.onLoss absent (Stall), the driver refuses to start with CheckpointLostError
  naming the Table and the ways out, and nothing is written to the Table's topic (its end
  offsets are unchanged: compaction may rewrite the log meanwhile, so records are not compared);
- Recompute, the input holding its whole history: the counts of every word ever read, although
  the input now says startingOffsets: latest (which alone would read nothing);
- the checkpoint lost again and the input trimmed (records deleted up to offset 2): Recompute
  refuses, naming the partition and its first offset, and the Table is untouched;
- StartFresh (startingOffsets: earliest): the counts restart from what the input still holds
  (b, a, c) and overwrite the Table's, as documented.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from rillet.runtime.driver import checkpoints
from rillet.tables import tables
from tests.integration import runtime_helpers as rt

MANIFEST = """
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: words}
spec: {partitions: 1}
---
apiVersion: rillet.io/v1alpha1
kind: Table
metadata: {name: counts}
spec:
  partitions: 1
  valueSchema: "word STRING, n BIGINT"
---
apiVersion: rillet.io/v1alpha1
kind: App
metadata: {name: counter}
spec:
  image: rillet/spark-runtime:0.1.0
  inputs:
    - name: words
      topicRef: {name: words}
      format: string
      startingOffsets: earliest
  pipeline:
    sql: SELECT value AS word, count(*) AS n FROM words GROUP BY value
  outputs:
    - tableRef: {name: counts}
      keyColumns: [word]
"""


def _counts(bootstrap: str, topic: str) -> dict[str, Any]:
    latest = tables.latest_per_key(rt.read_topic(bootstrap, topic))
    return {k.decode(): json.loads(e.value or b"null")["n"] for k, e in latest.items()}


def _starting_offsets(documents: list[dict[str, Any]], where: str) -> None:
    documents[-1]["spec"]["inputs"][0]["startingOffsets"] = where


def test_a_lost_checkpoint_stalls_and_each_choice_does_what_it_says(
    kafka_admin: AdminClient, kafka_bootstrap: str, kafka_prefix: str, tmp_path: Path
) -> None:
    documents = rt.load_manifests(MANIFEST)
    topics = rt.privatize(documents, kafka_prefix)
    rt.create_topics(
        kafka_admin,
        [
            NewTopic(topics["words"], 1, 1),
            NewTopic(topics["counts"], 1, 1, config={"cleanup.policy": "compact"}),
        ],
    )
    checkpoint = tmp_path / "ck"

    def run(**overrides: Any) -> None:
        rt.run_app(
            rt.build_spec(documents, bootstrap=kafka_bootstrap, checkpoint=checkpoint, **overrides)
        )

    rt.produce(kafka_bootstrap, topics["words"], [(None, w) for w in ("a", "a", "b")])
    run()
    assert _counts(kafka_bootstrap, topics["counts"]) == {"a": 2, "b": 1}

    shutil.rmtree(checkpoint)
    rt.produce(kafka_bootstrap, topics["words"], [(None, w) for w in ("a", "c")])
    _starting_offsets(documents, "latest")
    before = rt.end_offsets(kafka_bootstrap, topics["counts"])
    with pytest.raises(checkpoints.CheckpointLostError) as stalled:
        run()
    assert str(stalled.value).startswith(
        "nothing was started and the Table is untouched: restore the checkpoint, or set "
        "checkpoint.onLoss to Recompute"
    )
    assert str(stalled.value).endswith(
        f"Lost: the checkpoint of table-counts ({checkpoint}/outputs/table-counts) holds no "
        f"offsets while topic {topics['counts']} holds records."
    )
    assert rt.end_offsets(kafka_bootstrap, topics["counts"]) == before  # not a record written
    assert _counts(kafka_bootstrap, topics["counts"]) == {"a": 2, "b": 1}

    run(checkpoint_on_loss="Recompute")
    assert _counts(kafka_bootstrap, topics["counts"]) == {"a": 3, "b": 1, "c": 1}

    shutil.rmtree(checkpoint)
    trimmed = kafka_admin.delete_records([TopicPartition(topics["words"], 0, 2)])
    for future in trimmed.values():
        future.result(timeout=30)
    before = rt.end_offsets(kafka_bootstrap, topics["counts"])
    with pytest.raises(checkpoints.CheckpointLostError) as refused:
        run(checkpoint_on_loss="Recompute")
    assert (
        f"the inputs no longer hold their whole history (topic {topics['words']}: partition 0 "
        "starts at offset 2)"
    ) in str(refused.value)
    assert rt.end_offsets(kafka_bootstrap, topics["counts"]) == before

    _starting_offsets(documents, "earliest")
    run(checkpoint_on_loss="StartFresh")
    assert _counts(kafka_bootstrap, topics["counts"]) == {"a": 1, "b": 1, "c": 1}
