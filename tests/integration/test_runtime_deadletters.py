"""Bad records: dead-lettered with reason and coordinates, or stopping an App that has no DLQ.

Test plan:
- malformed JSON and JSON that does not fit the schema land in the dead-letter topic, key and
  value untouched, with the reason and the source topic, partition and offset in headers; the
  query goes on: good records before and after them reach the output; the same with the output
  and the dead letters written exactly-once (in Kafka transactions);
- an App without a dead-letter topic stops at the first bad record, naming where it is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from rillet.runtime import driving, progress
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
