"""A Table's local store holds what `rillet table get` computes from the same records.

Test plan:
- random records (keys moving across partitions, tombstones, key-less records, arrival out of
  order across partitions) applied in random batches leave the store equal to
  `tables.latest_per_key` of the same records: same keys, same values;
- an older record of a key arriving after a newer one, or after its tombstone, changes nothing;
- `forget_below` drops what a partition no longer holds below its log start, in that
  partition only (expired windows of a compact,delete topic leave no tombstone);
- lookups match as `rillet table get` does: json keys as JSON values (other spacing finds the
  key), a partial object finds every window of its group, string keys exactly;
- prefix reads return keys in order, bounded by the limit, including prefixes ending in 0xff;
- a reader on another thread sees committed writes;
- many keys at once (a lookup's batch, more than one query's worth) find what single reads find.
"""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path

from rillet.api.v1alpha1 import fields
from rillet.tables import tables
from rillet.tables.tablestore import TableStore


def _entry(
    key: str | bytes | None, value: str | None, partition: int, offset: int, timestamp: int = 0
) -> tables.Entry:
    return tables.Entry(
        key=key.encode() if isinstance(key, str) else key,
        value=value.encode() if value is not None else None,
        partition=partition,
        offset=offset,
        timestamp=timestamp,
    )


def _store(tmp_path: Path, key_format: fields.Format = "string") -> TableStore:
    return TableStore(tmp_path / "table.sqlite", key_format)


def _contents(store: TableStore) -> dict[bytes, bytes]:
    return dict(store.prefixed(b"", limit=1_000_000))


def _random_records(rng: random.Random) -> list[tables.Entry]:
    """Records of three partitions, timestamps never decreasing within one (as a producer's
    create times, or Kafka's log-append times): then "newer" orders all records one way."""
    offsets, clocks = [0, 0, 0], [0, 0, 0]
    records = []
    for _ in range(400):
        partition = rng.randrange(3)
        key = None if rng.random() < 0.03 else f"k{rng.randrange(25)}"
        value = None if rng.random() < 0.2 else f"v{rng.randrange(1000)}"
        clocks[partition] += rng.randrange(3)
        records.append(_entry(key, value, partition, offsets[partition], clocks[partition]))
        offsets[partition] += 1
    return records


def _interleaved(rng: random.Random, records: list[tables.Entry]) -> list[tables.Entry]:
    """The records as a consumer may see them: each partition in order, partitions mixed."""
    queues = {p: [r for r in records if r.partition == p] for p in range(3)}
    mixed = []
    while any(queues.values()):
        partition = rng.choice([p for p, queue in queues.items() if queue])
        mixed.append(queues[partition].pop(0))
    return mixed


def test_the_store_equals_the_latest_value_per_key_of_the_same_records(tmp_path: Path) -> None:
    rng = random.Random(7)
    for round_ in range(20):
        records = _random_records(rng)
        store = TableStore(tmp_path / f"round-{round_}.sqlite", "string")
        arrived = _interleaved(rng, records)
        while arrived:
            size = rng.randint(1, 60)
            store.apply(arrived[:size])
            arrived = arrived[size:]

        expected = {key: entry.value for key, entry in tables.latest_per_key(records).items()}
        assert _contents(store) == expected
        assert store.count() == len(expected)
        store.close()


def test_older_records_and_tombstones_change_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.apply([_entry("a", "new", 0, 5), _entry("a", "old", 0, 3)])
    store.apply([_entry("b", None, 1, 9, timestamp=100), _entry("b", "stale", 2, 1, timestamp=50)])

    assert store.get(b"a") == b"new"
    assert store.get(b"b") is None
    assert store.lookup("b") == []


def test_forget_below_drops_what_a_partition_no_longer_holds(tmp_path: Path) -> None:
    store = _store(tmp_path)
    windows = [_entry("w1", "1", 0, 0), _entry("w2", "2", 0, 1), _entry("w3", "3", 0, 2)]
    store.apply([*windows, _entry("x1", "1", 1, 0)])

    assert store.forget_below({0: 2, 1: 0}) == 2

    assert _contents(store) == {b"w3": b"3", b"x1": b"1"}


def test_lookups_match_as_table_get_does(tmp_path: Path) -> None:
    store = _store(tmp_path, "json")
    windows = [
        ({"page": "/home", "window_start": "10:00"}, '{"views": 3}'),
        ({"page": "/home", "window_start": "10:05"}, '{"views": 1}'),
        ({"page": "/cart", "window_start": "10:00"}, '{"views": 9}'),
    ]
    store.apply(
        [
            _entry(json.dumps(key, separators=(",", ":")), value, 0, offset)
            for offset, (key, value) in enumerate(windows)
        ]
    )

    spaced = '{"window_start": "10:05", "page": "/home"}'
    assert [value for _, value in store.lookup(spaced)] == [b'{"views": 1}']
    home = store.lookup('{"page": "/home"}')
    assert [json.loads(key)["window_start"] for key, _ in home] == ["10:00", "10:05"]
    assert store.lookup('{"page": "/about"}') == []
    assert store.lookup("not json") == []

    text = TableStore(tmp_path / "text.sqlite", "string")
    text.apply([_entry("alice", "1", 0, 0), _entry("alice2", "2", 0, 1)])
    assert text.lookup("alice") == [(b"alice", b"1")]
    assert text.lookup("ali") == []


def test_prefix_reads_are_ordered_and_bounded(tmp_path: Path) -> None:
    store = _store(tmp_path)
    keys = [b"user:2", b"user:10", b"user:1", b"order:1", b"user\xff", b"user\xff\x01", b"v"]
    store.apply([_entry(key, "x", 0, offset) for offset, key in enumerate(keys)])

    assert [key for key, _ in store.prefixed(b"user:", limit=10)] == [
        b"user:1",
        b"user:10",
        b"user:2",
    ]
    assert [key for key, _ in store.prefixed(b"user:", limit=2)] == [b"user:1", b"user:10"]
    assert [key for key, _ in store.prefixed(b"user\xff", limit=10)] == [
        b"user\xff",
        b"user\xff\x01",
    ]
    assert len(store.prefixed(b"", limit=100)) == len(keys)


def test_a_reader_on_another_thread_sees_committed_writes(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.apply([_entry("a", "1", 0, 0)])
    seen: list[bytes | None] = []

    reader = threading.Thread(target=lambda: seen.append(store.get(b"a")))
    reader.start()
    reader.join()
    store.apply([_entry("a", "2", 0, 1)])
    other = threading.Thread(target=lambda: seen.append(store.get(b"a")))
    other.start()
    other.join()

    assert seen == [b"1", b"2"]


def test_many_keys_at_once_find_what_single_reads_find(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.apply([_entry(f"k{n}", f"v{n}", n % 3, n) for n in range(2_500)])
    store.apply([_entry("k7", None, 7 % 3, 10_000)])  # a tombstone
    wanted = [f"k{n}".encode() for n in range(0, 3_000, 3)] + [b"k7", b"k7", b"nope"]

    found = store.get_many(wanted)

    assert found == {k: v for k in wanted if (v := store.get(k)) is not None}
    assert len(found) == 834  # k0, k3, ... k2499 but the tombstoned k7 and those never written
    assert b"k7" not in found
