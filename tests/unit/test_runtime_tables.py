"""Reading a Table: the latest record per key, and key lookups.

Test plan:
- the latest record of a key is the last by offset within a partition, by timestamp across
  partitions; a tombstone removes the key; records without a key are ignored;
- string and bytes keys match exactly; json keys match as JSON, and an object matches every
  key holding at least its fields (all windows of a page).
"""

from __future__ import annotations

from rillet.tables import tables


def _entry(
    key: str | None, value: str | None, partition: int, offset: int, timestamp: int = 0
) -> tables.Entry:
    return tables.Entry(
        key=key.encode() if key is not None else None,
        value=value.encode() if value is not None else None,
        partition=partition,
        offset=offset,
        timestamp=timestamp,
    )


def test_latest_per_key_by_offset_then_timestamp_without_tombstones() -> None:
    latest = tables.latest_per_key(
        [
            _entry("a", "1", 0, 0, timestamp=50),
            _entry("a", "2", 0, 1, timestamp=10),  # later offset wins in one partition
            _entry("b", "1", 0, 2),
            _entry("b", None, 0, 3),  # tombstone
            _entry("c", "old", 1, 9, timestamp=5),
            _entry("c", "new", 2, 0, timestamp=6),  # across partitions: the later timestamp
            _entry(None, "keyless", 0, 4),
        ]
    )

    assert {k: e.value for k, e in latest.items()} == {b"a": b"2", b"c": b"new"}


def test_string_keys_match_exactly() -> None:
    assert tables.key_matches(b"kafka", "kafka", "string")
    assert not tables.key_matches(b"kafka", "Kafka", "string")
    assert tables.same_key(b"kafka", "kafka", "string")


def test_json_keys_match_as_json_and_by_subset() -> None:
    stored = b'{"page":"/home","window_start":"2024-01-01T00:00:00.000Z"}'

    assert tables.key_matches(
        stored, '{"window_start": "2024-01-01T00:00:00.000Z", "page": "/home"}', "json"
    )
    assert tables.key_matches(stored, '{"page": "/home"}', "json")
    assert not tables.key_matches(stored, '{"page": "/about"}', "json")
    assert not tables.key_matches(stored, "not json", "json")
    assert tables.same_key(
        stored, '{"page":"/home","window_start":"2024-01-01T00:00:00.000Z"}', "json"
    )
    assert not tables.same_key(stored, '{"page": "/home"}', "json")


def test_lookup_orders_matches_by_key() -> None:
    latest = tables.latest_per_key(
        [
            _entry('{"p":"b","w":2}', "x", 0, 0),
            _entry('{"p":"b","w":1}', "y", 0, 1),
            _entry('{"p":"c","w":1}', "z", 0, 2),
        ]
    )

    found = tables.lookup(latest, '{"p": "b"}', "json")

    assert [e.value for e in found] == [b"y", b"x"]
