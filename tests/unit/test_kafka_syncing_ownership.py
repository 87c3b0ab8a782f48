"""The topic syncer asks the claims before it creates or changes a topic, in one batch.

No I/O: the admin and the claims store are in-memory stand-ins (the real ones are
tests/integration/test_topics_operator.py's part).

Test plan (one batch of four topics):
- a new topic is claimed before it is created, then created;
- an existing topic nobody claims, without the opt-in: not altered, Stalled TopicExists, and its
  configs are not reported (they are not the object's to see);
- a topic another release claims, even with the opt-in: not altered, TopicClaimed;
- an existing topic with the opt-in: claimed as adopted, its declared config set and its other
  overrides kept (no DELETE);
- deleting: refused for a topic the object has no claim on; the object's own is deleted and its
  claim released.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import cast

import pytest

from rillet.kafka.admin import TopicAdmin
from rillet.kafka.claimstore import ClaimStore
from rillet.kafka.syncing import TopicSyncer
from rillet.kafka.topicrequests import KafkaFailure
from rillet.reconcile.topicconfigs import ConfigDiff
from rillet.reconcile.topicownership import ClaimRecord, Wish
from rillet.reconcile.topics import DesiredTopic, ObservedTopic, SyncOutcome

pytestmark = pytest.mark.unit

RELEASE = "ns/rillet"


class MemoryAdmin:
    def __init__(self, topics: dict[str, dict[str, str]]) -> None:
        self.topics = topics  # name -> overrides
        self.created: list[str] = []
        self.altered: dict[str, ConfigDiff] = {}
        self.deleted: list[str] = []

    async def describe(
        self, names: Iterable[str]
    ) -> dict[str, ObservedTopic | KafkaFailure | None]:
        return {
            n: ObservedTopic(n, f"id-{n}", 1, 1, dict(self.topics[n])) if n in self.topics else None
            for n in names
        }

    async def create(self, topics: Sequence[DesiredTopic]) -> dict[str, KafkaFailure | None]:
        self.created += [t.name for t in topics]
        self.topics |= {t.name: dict(t.config) for t in topics}
        return {t.name: None for t in topics}

    async def grow(self, partitions: Mapping[str, int]) -> dict[str, KafkaFailure | None]:
        return {name: None for name in partitions}

    async def alter_configs(
        self, diffs: Mapping[str, ConfigDiff]
    ) -> dict[str, KafkaFailure | None]:
        self.altered |= diffs
        for name, diff in diffs.items():
            self.topics[name] |= diff.set
            for key in diff.delete:
                self.topics[name].pop(key)
        return {name: None for name in diffs}

    async def delete(self, names: Sequence[str]) -> dict[str, KafkaFailure | None]:
        self.deleted += names
        return {name: None for name in names}

    def close(self) -> None:
        pass


class MemoryClaims:
    def __init__(self, records: dict[str, ClaimRecord]) -> None:
        self.records = records
        self.recorded: list[dict[str, ClaimRecord | None]] = []

    def get(self, name: str) -> ClaimRecord | None:
        return self.records.get(name)

    async def refresh(self) -> None:
        pass

    async def record(self, claims: Mapping[str, ClaimRecord | None]) -> None:
        if claims:
            self.recorded.append(dict(claims))
        for name, claim in claims.items():
            if claim is None:
                self.records.pop(name, None)
            else:
                self.records[name] = claim

    def close(self) -> None:
        pass


def _claim(name: str, release: str = RELEASE) -> ClaimRecord:
    return ClaimRecord(release=release, kind="Topic", namespace="team", name=name, uid=f"u-{name}")


def _desired(name: str, *, adopt: bool = False) -> DesiredTopic:
    return DesiredTopic(
        name=name,
        partitions=1,
        replication_factor=None,
        config={"max.message.bytes": "2000000"},
        wish=Wish(claim=_claim(name), adopt=adopt),
    )


def test_a_batch_changes_only_the_topics_its_objects_may_own() -> None:
    admin = MemoryAdmin(
        {
            "foreign": {"retention.ms": "-1"},
            "theirs": {"retention.ms": "-1"},
            "adopted": {"retention.ms": "-1"},
        }
    )
    claims = MemoryClaims({"theirs": _claim("x", release="ns/other")})

    async def scenario() -> dict[str, SyncOutcome]:
        syncer = TopicSyncer(
            cast(TopicAdmin, admin), queue_size=10, claims=cast(ClaimStore, claims)
        )
        serving = asyncio.create_task(syncer.run())
        topics = [
            _desired("new"),
            _desired("foreign"),
            _desired("theirs", adopt=True),
            _desired("adopted", adopt=True),
        ]
        outcomes = await asyncio.gather(*(syncer.sync(t) for t in topics))
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        return {t.name: o for t, o in zip(topics, outcomes, strict=True)}

    outcomes = asyncio.run(scenario())

    assert admin.created == ["new"]
    assert set(admin.altered) == {"adopted"}
    assert admin.altered["adopted"] == ConfigDiff(set={"max.message.bytes": "2000000"})
    assert admin.topics["foreign"] == {"retention.ms": "-1"}
    assert admin.topics["theirs"] == {"retention.ms": "-1"}
    foreign, theirs = outcomes["foreign"], outcomes["theirs"]
    assert [p.reason for p in foreign.problems] == ["TopicExists"]
    assert foreign.observed is None
    assert [p.reason for p in theirs.problems] == ["TopicClaimed"]
    assert claims.records["new"] == _claim("new")
    assert claims.records["adopted"].adopted
    assert claims.records["theirs"].release == "ns/other"
    assert "foreign" not in claims.records


def test_deletion_only_of_a_topic_the_object_claims() -> None:
    admin = MemoryAdmin({"foreign": {}, "mine": {}})
    claims = MemoryClaims({"mine": _claim("mine")})

    async def scenario() -> tuple[str | None, str | None]:
        syncer = TopicSyncer(
            cast(TopicAdmin, admin), queue_size=10, claims=cast(ClaimStore, claims)
        )
        refused = await syncer.deletion_refusal(_claim("foreign"), "foreign")
        allowed = await syncer.deletion_refusal(_claim("mine"), "mine")
        await syncer.delete("mine", owner="u-mine")
        return refused, allowed

    refused, allowed = asyncio.run(scenario())
    assert refused is not None
    assert allowed is None
    assert admin.deleted == ["mine"]
    assert "mine" not in claims.records
