"""Bad records: dead-lettered with reason and coordinates, or stopping an App that has no DLQ.

Test plan:
- malformed JSON and JSON that does not fit the schema land in the dead-letter topic, key and
  value untouched, with the reason and the source topic, partition and offset in headers; the
  query goes on: good records before and after them reach the output; the same with the output
  and the dead letters written exactly-once (in Kafka transactions);
- an App without a dead-letter topic stops at the first bad record, naming where it is;
- exactly-once dead letters across replayed batches (`rillet run` drivers, 4 input partitions,
  small batches): SIGKILL to the driver's process group while paused (SIGSTOP) where a batch's
  dead letters are committed in Kafka and not in its checkpoint (the restarted driver runs that
  batch again and must skip them), then a second driver killed paused inside a dead-letter
  transaction (its records at the broker, uncommitted: the next driver must abort them and
  write them again), then a run to the end: a read_committed consumer reading the dead-letter
  topic record by record, nothing de-duplicated, finds each bad record the test produced
  exactly once, with its value and the partition and offset Kafka acknowledged for it; a
  read_uncommitted one finds the aborted copies (the kill did cut a transaction); every good
  record reached the output.
"""

from __future__ import annotations

import functools
import json
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from rillet.runtime.batches import progress
from rillet.runtime.driver import driving
from tests.integration import replays
from tests.integration import runtime_helpers as rt
from tests.integration.polling import wait_for

BAD = [
    ("b1", "not json at all"),
    ("b2", '{"id": "p-bad", "amount": "lots"}'),
    ("b3", '{"id": "p-cut", "amount": 1'),
]


def _setup(
    kafka_admin: AdminClient, prefix: str, *, dead_letters: bool
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    documents = rt.load_manifests(rt.payments_filter())
    if not dead_letters:
        del documents[-1]["spec"]["deadLetterTopic"]
    topics = rt.privatize(documents, prefix)
    rt.create_topics(kafka_admin, [NewTopic(t, 1, 1) for t in topics.values()])
    return documents, topics


@pytest.mark.parametrize("delivery", ["AtLeastOnce", "ExactlyOnce"])
def test_bad_records_go_to_the_dead_letter_topic_and_the_query_goes_on(
    kafka_admin: AdminClient,
    kafka_bootstrap: str,
    kafka_prefix: str,
    tmp_path: Path,
    delivery: str,
) -> None:
    documents, topics = _setup(kafka_admin, kafka_prefix, dead_letters=True)
    app = documents[-1]["spec"]
    app["deadLetterTopic"]["delivery"] = delivery
    for output in app["outputs"]:
        output["delivery"] = delivery
    good_before = [(f"k{i}", json.dumps({"id": f"p{i}", "amount": i + 0.5})) for i in range(5)]
    rt.produce(kafka_bootstrap, topics["payments"], [*good_before, *BAD])
    spec = rt.build_spec(
        documents, bootstrap=kafka_bootstrap, checkpoint=tmp_path / "ck", available_now=False
    )

    batches: list[progress.BatchProgress] = []
    with rt.running(spec, on_batch=[batches.append]) as driver:

        def valid() -> set[bytes | None]:
            return {e.key for e in rt.read_topic(kafka_bootstrap, topics["payments-valid"])}

        wait_for(lambda: len(valid()) == 5, timeout=120, what="the good records before the bad")
        later = [(f"k{i}", json.dumps({"id": f"p{i}", "amount": 2})) for i in range(5, 8)]
        rt.produce(kafka_bootstrap, topics["payments"], later)
        wait_for(lambda: len(valid()) == 8, timeout=60, what="the good records after the bad")
        assert driver.failure() is None

    assert valid() == {f"p{i}".encode() for i in range(8)}
    dead = rt.headers_of(kafka_bootstrap, topics["payments-dlq"])
    by_offset = {h["rillet.source.offset"]: (value, h) for value, h in dead}
    assert sorted(by_offset) == ["5", "6", "7"]  # the offsets of the bad records, each once
    for (_, raw), offset in zip(BAD, ["5", "6", "7"], strict=True):
        value, headers = by_offset[offset]
        assert value == raw.encode()  # untouched, so it can be replayed
        assert headers["rillet.source.topic"] == topics["payments"]
        assert headers["rillet.source.partition"] == "0"
        assert headers["rillet.app"] == "payments-filter"
    kinds = {o: h["rillet.error.kind"] for o, (_, h) in by_offset.items()}
    assert kinds == {"5": "malformed-json", "6": "schema-mismatch", "7": "malformed-json"}
    assert by_offset["6"][1]["rillet.error.reason"] == (
        "value does not match the schema: id STRING, amount DECIMAL(10,2)"
    )
    assert by_offset["5"][1]["rillet.error.reason"] == "value is not valid JSON"
    counted = [b.observed.get("dead_letters_payments", {}).get("rows") for b in batches]
    assert sum(int(c or 0) for c in counted) == 3  # published as rillet_observed_rows


def test_without_a_dead_letter_topic_a_bad_record_stops_the_app_naming_it(
    kafka_admin: AdminClient, kafka_bootstrap: str, kafka_prefix: str, tmp_path: Path
) -> None:
    documents, topics = _setup(kafka_admin, kafka_prefix, dead_letters=False)
    rt.produce(kafka_bootstrap, topics["payments"], [("k0", '{"id": "p0", "amount": 1}'), BAD[0]])
    spec = rt.build_spec(documents, bootstrap=kafka_bootstrap, checkpoint=tmp_path / "ck")

    with pytest.raises(driving.QueryFailedError) as failed:
        rt.run_app(spec)

    message = str(failed.value)
    assert (
        f"bad record in topic {topics['payments']} partition 0 offset 1: malformed-json" in message
    )
    assert "has no deadLetterTopic" in message


PARTITIONS = 4
RECORDS = 12_000
PER_BATCH = 200  # small batches: many of them, so the kills land mid-stream
FINAL_PER_BATCH = 5_000  # after the kills: the replay is as logged, the rest goes faster


def _payments(rng: random.Random) -> tuple[list[tuple[str, str]], set[str]]:
    """RECORDS payments, about 1 in 12 of them bad (each kind of bad record the runtime
    documents), every one with a key and value of its own; the keys of the bad ones."""
    records, bad = [], set()
    for n in range(RECORDS):
        kind = rng.randrange(36)
        if kind == 0:
            records.append((f"bad{n}", f"not json at all {n}"))
        elif kind == 1:
            records.append((f"bad{n}", json.dumps({"id": f"p{n}", "amount": "lots"})))
        elif kind == 2:
            records.append((f"bad{n}", f'{{"id": "p{n}", "amount": 1'))
        else:
            records.append((f"k{n}", json.dumps({"id": f"p{n}", "amount": 1 + n % 7})))
            continue
        bad.add(f"bad{n}")
    return records, bad


def _dead_letters_ahead_of_checkpoint(
    bootstrap: str, topics: dict[str, str], query: Path, *, after: int
) -> bool:
    """Whether read_committed consumers see a dead letter of a batch the dead-letter query's
    checkpoint has not committed (with the driver paused, so neither moves meanwhile), once the
    query has committed `after` batches: markers of earlier batches are then in Kafka too."""
    done = replays.batch_ids(query, "commits")
    if len(done) < after:
        return False
    ends = replays.logged_offsets(query, done[-1])[topics["payments"]] if done else {}
    return any(
        int(r.headers["rillet.source.offset"])
        >= ends.get(int(r.headers["rillet.source.partition"]), 0)
        for r in replays.raw_records(bootstrap, topics["payments-dlq"])
    )


def _in_flight(query: Path) -> int:
    """The batch a query has logged and not committed (a killed driver's: the next one runs
    it again)."""
    [batch] = set(replays.batch_ids(query, "offsets")) - set(replays.batch_ids(query, "commits"))
    return batch


def test_dead_letters_of_replayed_batches_are_each_in_kafka_once(
    kafka_admin: AdminClient,
    kafka_bootstrap: str,
    kafka_prefix: str,
    tmp_path: Path,
    measurement: Callable[[str], None],
) -> None:
    documents = rt.load_manifests(rt.payments_filter(PARTITIONS))
    documents[-1]["spec"]["deadLetterTopic"]["delivery"] = "ExactlyOnce"
    topics = rt.privatize(documents, kafka_prefix)
    rt.create_topics(
        kafka_admin,
        [
            NewTopic(topics["payments"], PARTITIONS, 1),
            NewTopic(topics["payments-valid"], 1, 1),
            NewTopic(topics["payments-dlq"], 1, 1),
        ],
    )
    manifest = rt.write_manifests(documents, tmp_path / "app.yaml")
    records, bad = _payments(random.Random(34))
    located = replays.produce_located(
        kafka_bootstrap, topics["payments"], records, partitions=PARTITIONS
    )
    truth = {
        key: (value, where)
        for (key, value), where in zip(records, located, strict=True)
        if key in bad
    }
    dlq, log = topics["payments-dlq"], tmp_path / "driver.log"
    query = tmp_path / "checkpoint" / "dead-letters" / "payments"

    # A batch whose dead letters Kafka committed (some write units, or all) and the checkpoint
    # did not: the next driver runs it again, and its markers must say those units are written.
    ahead = functools.partial(
        _dead_letters_ahead_of_checkpoint, kafka_bootstrap, topics, query, after=3
    )
    with rt.killed_at_exit(
        rt.start_driver(manifest, kafka_bootstrap, tmp_path, per_batch=PER_BATCH), log=log
    ) as driver:
        wait_for(
            lambda: replays.paused_if(driver, ahead),
            timeout=240,
            interval=0.05,
            what="a batch's dead letters committed in Kafka, not in the checkpoint",
        )
        replays.kill(driver)
    ahead_at = _in_flight(query)

    # A dead-letter transaction left open: its records are at the broker, and the next driver's
    # producer of the same unit must abort them before it writes them again. Open for a second
    # while paused: a commit sent just before the pause would have completed meanwhile.
    def held_open() -> bool:
        if len(replays.batch_ids(query, "commits")) < ahead_at + 2:  # past the replayed one
            return False
        return replays.holds(
            functools.partial(replays.open_transaction, kafka_bootstrap, dlq), seconds=1
        )

    with rt.killed_at_exit(
        rt.start_driver(manifest, kafka_bootstrap, tmp_path, per_batch=PER_BATCH), log=log
    ) as driver:
        wait_for(
            lambda: replays.paused_if(driver, held_open),
            timeout=240,
            interval=0.05,
            what="the driver paused inside a dead-letter transaction",
        )
        replays.kill(driver)
    assert replays.open_transaction(kafka_bootstrap, dlq), "the kill left no transaction open"
    inside_at = _in_flight(query)
    assert inside_at > ahead_at
    read = sum(replays.logged_offsets(query, inside_at - 1)[topics["payments"]].values())
    assert read < RECORDS, "the driver should have been killed mid-stream"

    rt.run_driver_to_end(manifest, kafka_bootstrap, tmp_path, per_batch=FINAL_PER_BATCH)

    letters = replays.raw_records(kafka_bootstrap, dlq)  # read_committed, record by record
    copies = Counter((r.key or b"").decode() for r in letters)
    twice = {key: n for key, n in copies.items() if n > 1}
    assert not twice, f"dead letters written more than once: {sorted(twice.items())[:5]}"
    assert set(copies) == set(truth), (
        f"missing {sorted(set(truth) - set(copies))[:5]}, unexpected "
        f"{sorted(set(copies) - set(truth))[:5]}"
    )
    assert len(letters) == len(truth)
    for letter in letters:
        value, (partition, offset) = truth[(letter.key or b"").decode()]
        assert letter.value == value.encode()
        assert letter.headers["rillet.source.partition"] == str(partition)
        assert letter.headers["rillet.source.offset"] == str(offset)
    aborted = len(replays.raw_records(kafka_bootstrap, dlq, isolation="read_uncommitted"))
    aborted -= len(letters)
    assert aborted > 0, "no aborted dead letter in the topic: the kill cut no transaction"
    good = {f"p{key[1:]}".encode() for key, _ in records if key not in bad}
    assert {e.key for e in rt.read_topic(kafka_bootstrap, topics["payments-valid"])} == good
    measurement(
        f"dead letters across 2 SIGKILLs (batch {ahead_at} ahead of its checkpoint, then inside "
        f"a transaction of batch {inside_at}, {read} of {RECORDS} records read): "
        f"{len(truth)} bad records, each once for read_committed readers; {aborted} aborted "
        f"copies for read_uncommitted ones"
    )
