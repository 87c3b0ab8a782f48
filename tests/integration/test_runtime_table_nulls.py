"""NULLs on the way into a Table: tombstones and rows without a key (real Kafka and Spark).

Test plan (a loader App upserting profile updates into a Table keyed by user, two records per
micro-batch, read back from the Table's Kafka topic with an independent consumer):
- a row whose non-key value columns are all NULL becomes a tombstone: a record of its key with
  a NULL value, after the key's earlier value; the key is then absent from the Table
  (`rillet table get` exits 1);
- a row with only some value columns NULL is an ordinary value;
- rows whose key column is NULL (given as null, or missing) reach no record, and are counted
  in the batches' observed metrics (`<output>_without_key`), each once.
"""

from __future__ import annotations

import json
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from rillet.runtime.batches import progress
from rillet.tables import tables
from tests.integration import runtime_helpers as rt

MANIFEST = """
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: profile-updates}
spec: {partitions: 1}
---
apiVersion: rillet.io/v1alpha1
kind: Table
metadata: {name: profiles}
spec:
  partitions: 1
  valueSchema: "user STRING, name STRING, tier STRING"
---
apiVersion: rillet.io/v1alpha1
kind: App
metadata: {name: profile-loader}
spec:
  image: rillet/spark-runtime:0.1.0
  inputs:
    - name: updates
      topicRef: {name: profile-updates}
      schema: "user STRING, name STRING, tier STRING"
      startingOffsets: earliest
  pipeline:
    sql: SELECT user, name, tier FROM updates
  outputs:
    - tableRef: {name: profiles}
      keyColumns: [user]
"""

UPDATES = [
    ("u1", {"user": "u1", "name": "Ada", "tier": "gold"}),
    ("u2", {"user": "u2", "name": "Bob", "tier": "silver"}),
    ("u2", {"user": "u2", "name": None, "tier": None}),  # a tombstone for u2
    ("k1", {"user": None, "name": "Ghost", "tier": "gold"}),  # no key
    ("k2", {"name": "Nobody", "tier": "silver"}),  # no key either (user missing)
    ("u3", {"user": "u3", "name": "Cy", "tier": None}),  # a value, one column NULL
]


def test_null_values_are_tombstones_and_keyless_rows_are_counted_and_left_out(
    kafka_admin: AdminClient, kafka_bootstrap: str, kafka_prefix: str, tmp_path: Path
) -> None:
    documents = rt.load_manifests(MANIFEST)
    topics = rt.privatize(documents, kafka_prefix)
    rt.create_topics(
        kafka_admin,
        [
            NewTopic(topics["profile-updates"], 1, 1),
            NewTopic(topics["profiles"], 1, 1, config={"cleanup.policy": "compact"}),
        ],
    )
    rt.produce(
        kafka_bootstrap,
        topics["profile-updates"],
        [(key, json.dumps(value)) for key, value in UPDATES],
    )
    batches: list[progress.BatchProgress] = []

    rt.run_app(
        rt.build_spec(
            documents,
            bootstrap=kafka_bootstrap,
            checkpoint=tmp_path / "ck",
            max_offsets_per_trigger=2,
        ),
        on_batch=[batches.append],
    )

    written = rt.read_topic(kafka_bootstrap, topics["profiles"])
    records = [(e.key, json.loads(e.value) if e.value is not None else None) for e in written]
    assert [key for key, _ in records] == [b"u1", b"u2", b"u2", b"u3"]  # no record without key
    assert records[1][1] == {"user": "u2", "name": "Bob", "tier": "silver"}
    assert records[2][1] is None, "all value columns NULL: a tombstone"
    assert records[3][1] is not None
    assert (records[3][1]["user"], records[3][1]["name"]) == ("u3", "Cy")
    assert records[3][1].get("tier") is None

    assert len(batches) == 3, "two records per micro-batch"
    keyless = [
        int((b.observed.get("table_profiles_without_key") or {}).get("rows") or 0) for b in batches
    ]
    assert keyless == [0, 1, 1], "each keyless row counted once, in its batch"

    assert sorted(tables.latest_per_key(written)) == [b"u1", b"u3"]
    manifest = rt.write_manifests(documents, tmp_path / "profiles.yaml")
    absent = rt.cli("table", "get", "profiles", "u2", "-b", kafka_bootstrap, "-f", str(manifest))
    assert absent.returncode == 1, absent.stdout
    assert "no key u2" in absent.stderr
