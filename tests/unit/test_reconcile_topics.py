"""Planning a topic, comparing configs by type, conflicts and status derivation (pure).

Test plan:
- config values compare by their Kafka type: 0 vs 0.0, 1000 vs "1000", list order, booleans;
  numbers no Kafka setting can hold (a hundred million digits, 5,000 digits) are compared as
  written, at once, instead of being written out in full (a minute of CPU, or a ValueError).
- the diff SETs what differs and DELETEs only overrides missing from spec.
- a missing topic is created; more partitions grow it; fewer is a problem, not a shrink;
  a replication-factor change is a problem while config changes are still planned.
- creates are split under Kafka's 10,000-partitions-per-request limit.
- the oldest claim owns a topic; within one second the incumbent keeps it.
- conditions keep their transition time while their status holds; merge patches remove keys.
- an unreachable Kafka says what to check: credentials for a refused login, the CA for a
  certificate, else the bootstrap servers.
- Table changelogs: compact, or compact,delete with retention = expiry; partitions from the
  writer, with a warning on mismatch, waiting when unknown.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from rillet.api.v1alpha1 import tables
from rillet.kafka.admin import split_creates
from rillet.reconcile import claims, naming, statuses
from rillet.reconcile import tables as table_planning
from rillet.reconcile.topicconfigs import canonical, canonical_config, diff
from rillet.reconcile.topics import DesiredTopic, ObservedTopic, SyncOutcome, plan


@pytest.mark.parametrize(
    ("key", "declared", "reported"),
    [
        ("retention.ms", 1000, "1000"),
        ("retention.ms", "1000", "1000"),
        ("min.cleanable.dirty.ratio", "0.50", "0.5"),
        ("min.cleanable.dirty.ratio", "0", "0.0"),
        ("preallocate", "true", "true"),
        ("cleanup.policy", "delete,compact", "compact,delete"),
    ],
)
def test_config_values_compare_by_type(key: str, declared: int | str, reported: str) -> None:
    assert canonical(key, declared) == canonical(key, reported)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("min.cleanable.dirty.ratio", "1e99999999"),
        ("min.cleanable.dirty.ratio", "1e-99999999"),
        ("retention.ms", "9" * 5000),
        ("retention.ms", "-" + "9" * 8000),
    ],
)
def test_huge_numbers_compare_as_written(key: str, value: str) -> None:
    assert canonical(key, value) == value


def test_config_diff_sets_changes_and_deletes_only_undeclared_overrides() -> None:
    desired = canonical_config({"retention.ms": 1000, "segment.ms": "60000"})
    overrides = {"retention.ms": "1000", "segment.ms": "30000", "max.message.bytes": "1"}
    result = diff(desired, overrides)
    assert result.set == {"segment.ms": "60000"}
    assert result.delete == ("max.message.bytes",)


def test_unchanged_config_plans_nothing() -> None:
    desired = DesiredTopic("t", 3, None, canonical_config({"retention.ms": 5}))
    observed = ObservedTopic("t", "id", 3, 1, {"retention.ms": "5"})
    assert not plan(desired, observed).changes


def test_missing_topic_is_created() -> None:
    assert plan(DesiredTopic("t", 3, None), None).create


def test_more_partitions_grow_the_topic() -> None:
    assert plan(DesiredTopic("t", 6, None), ObservedTopic("t", "id", 3, 1)).grow_to == 6


def test_fewer_partitions_is_a_problem_and_config_still_planned() -> None:
    desired = DesiredTopic("t", 2, None, {"retention.ms": "9"})
    result = plan(desired, ObservedTopic("t", "id", 5, 1, {"retention.ms": "1"}))
    assert result.grow_to is None
    assert [p.reason for p in result.problems] == ["PartitionDecreaseNotSupported"]
    assert "Set spec.partitions to 5 or more" in result.problems[0].message
    assert result.config.set == {"retention.ms": "9"}


def test_replication_factor_change_is_a_problem() -> None:
    result = plan(DesiredTopic("t", 1, 3), ObservedTopic("t", "id", 1, 1))
    assert [p.reason for p in result.problems] == ["ReplicationFactorChangeNotSupported"]


def test_creates_split_under_the_partition_limit() -> None:
    topics = [DesiredTopic(f"t{i}", 4000, None) for i in range(5)]
    groups = list(split_creates(topics))
    assert [len(g) for g in groups] == [2, 2, 1]
    assert all(sum(t.partitions for t in g) <= 10_000 for g in groups)


def _claim(seconds: int, *, uid: str, challenger: bool = True) -> claims.Claim:
    created = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)
    return claims.Claim(created, challenger, uid, "Topic", "ns", uid)


def test_oldest_claim_owns_the_topic() -> None:
    older, newer = _claim(0, uid="b"), _claim(5, uid="a", challenger=False)
    assert claims.owner([newer, older]) == older


def test_a_deleted_predecessor_still_indexed_is_no_rival() -> None:
    # A namespace deleted and made again: the index may still hold the old Topic of this name.
    ghost = claims.Claim(datetime(2026, 1, 1, tzinfo=UTC), False, "old", "Topic", "ns", "t")
    subject = claims.Claim(datetime(2026, 1, 2, tzinfo=UTC), True, "new", "Topic", "ns", "t")
    assert claims.rivals_of(subject, [ghost, subject]) == ()


def test_of_an_other_objects_ghost_and_itself_only_the_newest_is_a_rival() -> None:
    subject = _claim(9, uid="s")
    ghost = claims.Claim(datetime(2026, 1, 1, tzinfo=UTC), False, "old", "Table", "other", "t")
    live = claims.Claim(datetime(2026, 1, 2, tzinfo=UTC), False, "new", "Table", "other", "t")
    assert claims.rivals_of(subject, [live, ghost, subject]) == (live,)


def test_incumbent_wins_within_the_same_second() -> None:
    incumbent, challenger = _claim(0, uid="z", challenger=False), _claim(0, uid="a")
    assert claims.owner([challenger, incumbent]) == incumbent


def test_namespace_prefix_and_length_problem() -> None:
    name = naming.kafka_topic_name(
        object_name="orders", namespace="team-a", spec_topic_name=None, prefix_namespace=True
    )
    assert name == "team-a.orders"
    assert naming.name_problem("x" * 250) is not None
    assert naming.name_problem(name) is None


def test_an_object_keeps_the_kafka_name_it_has_when_the_prefix_setting_changes() -> None:
    def name(*, prefix: bool, recorded: str | None, spec: str | None = None) -> str:
        return naming.kafka_topic_name(
            object_name="orders",
            namespace="team-a",
            spec_topic_name=spec,
            prefix_namespace=prefix,
            recorded=recorded,
        )

    # Upgraded to the prefixing default: the topic an App already reads stays.
    assert name(prefix=True, recorded="orders") == "orders"
    assert name(prefix=False, recorded="team-a.orders") == "team-a.orders"
    assert name(prefix=True, recorded=None) == "team-a.orders"
    # A new spec.topicName is a new name, in the setting's form.
    assert name(prefix=True, recorded="orders", spec="orders-v2") == "team-a.orders-v2"
    # A status naming another namespace's form is not a name of this object.
    assert name(prefix=True, recorded="team-b.orders") == "team-a.orders"


NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_conditions_keep_transition_time_while_status_holds() -> None:
    ready = statuses.Verdict("ready", "TopicReady", "fine")
    first = statuses.derive_conditions(ready, generation=1, previous=None, now=NOW)
    later = statuses.derive_conditions(
        ready, generation=1, previous=first, now=NOW + timedelta(minutes=5)
    )
    assert later == first
    stalled = statuses.Verdict("stalled", "TopicConflict", "taken")
    changed = {
        c["type"]: c
        for c in statuses.derive_conditions(
            stalled, generation=2, previous=first, now=NOW + timedelta(minutes=5)
        )
    }
    assert changed["Ready"]["status"] == "False"
    assert changed["Ready"]["lastTransitionTime"] == "2026-01-01T12:05:00Z"
    assert changed["Reconciling"]["lastTransitionTime"] == "2026-01-01T12:00:00Z"
    assert changed["Stalled"]["status"] == "True"


def test_kstatus_reading_of_each_state() -> None:
    def statuses_of(state: statuses.State) -> dict[str, str]:
        verdict = statuses.Verdict(state, "Reason", "message")
        derived = statuses.derive_conditions(verdict, generation=1, previous=None, now=NOW)
        return {c["type"]: c["status"] for c in derived}

    assert statuses_of("ready") == {"Ready": "True", "Reconciling": "False", "Stalled": "False"}
    assert statuses_of("progressing")["Reconciling"] == "True"
    assert statuses_of("stalled") == {"Ready": "False", "Reconciling": "False", "Stalled": "True"}


@pytest.mark.parametrize(
    ("before", "ready"),
    [("ready", "True"), ("stalled", None), ("progressing", None), (None, None)],
)
def test_a_paused_object_keeps_only_a_true_ready(
    before: statuses.State | None, ready: str | None
) -> None:
    """Paused is neither Reconciling nor Stalled; Ready stays only if True, since Ready False or
    Unknown would keep a Flux health check waiting for as long as the object is paused."""
    previous = (
        statuses.derive_conditions(
            statuses.Verdict(before, "Before", "m"), generation=1, previous=None, now=NOW
        )
        if before
        else None
    )
    paused = statuses.derive_conditions(
        statuses.Verdict("paused", "Paused", "paused by annotation"),
        generation=2,
        previous=previous,
        now=NOW,
    )
    expected = {"Reconciling": "False", "Stalled": "False"} | ({"Ready": ready} if ready else {})
    assert {c["type"]: c["status"] for c in paused} == expected
    assert statuses.standing_condition(paused)["reason"] == "Paused"


def test_a_change_kafka_does_not_show_yet_is_pending_not_ready() -> None:
    """Ready says Kafka has the topic as declared: not while describe still lags a change."""
    observed = ObservedTopic(
        name="t", partitions=2, replication_factor=1, overrides={}, topic_id="x"
    )

    verdict = statuses.topic_verdict(SyncOutcome(observed=observed, lagging=True), kafka_name="t")

    assert (verdict.state, verdict.reason) == ("progressing", "TopicPending")
    assert "does not show it yet" in verdict.message


def test_unreachable_kafka_is_progress_not_failure() -> None:
    verdict = statuses.topic_verdict(SyncOutcome(unavailable="no broker"), kafka_name="t")
    assert (verdict.state, verdict.reason) == ("progressing", "KafkaUnavailable")


@pytest.mark.parametrize(
    ("reason", "advice"),
    [
        ("Local: Timed out (sasl_ssl://10.0.0.1:9093/bootstrap)", "Check the bootstrap servers"),
        (
            "Kafka at the configured bootstrap servers is unreachable: Kafka refused the "
            "operator's login (SASL authentication error: Authentication failed due to invalid "
            "credentials with SASL mechanism SCRAM-SHA-512); Local: Timed out",
            "Check the chart values kafka.credentialsSecret",
        ),
        (
            "TLS with the brokers failed (SSL handshake failed: certificate verify failed); "
            "Local: Timed out",
            "Check the chart value kafka.caSecret",
        ),
    ],
)
def test_unreachable_kafka_says_what_to_check(reason: str, advice: str) -> None:
    message = statuses.unavailable_message(reason)

    assert message.startswith(f"{reason}; retrying. {advice}")


def test_merge_patch_removes_vanished_keys_and_is_empty_when_equal() -> None:
    previous = {"config": {"a": "1", "b": "2"}, "topicId": "x"}
    assert statuses.merge_patch(previous, previous) == {}
    assert statuses.merge_patch(previous, {"config": {"a": "1"}}) == {
        "config": {"b": None},
        "topicId": None,
    }


def test_table_changelog_config() -> None:
    plain = tables.TableSpec.model_validate({"config": {"retention.bytes": 10}}, strict=False)
    assert table_planning.changelog_config(plain) == {
        "cleanup.policy": "compact",
        "retention.bytes": "10",
    }
    windowed = tables.TableSpec.model_validate(
        {"window": {"type": "tumbling", "size": "10m"}}, strict=False
    )
    assert table_planning.changelog_config(windowed) == {
        "cleanup.policy": "compact,delete",
        "retention.ms": str(24 * 3600 * 1000),
    }


def test_a_windowed_tables_retention_covers_its_writers_lateness() -> None:
    windowed = tables.TableSpec.model_validate(
        {"window": {"type": "tumbling", "size": "20h"}}, strict=False
    )
    late = [
        table_planning.Writer(app="clicks", input_partitions=(3,), lateness="2h"),
        table_planning.Writer(app="views", input_partitions=(3,), lateness="6h"),
        table_planning.Writer(app="plain", input_partitions=(3,)),
    ]
    hours = 3600 * 1000
    assert table_planning.changelog_config(windowed, late[2:])["retention.ms"] == str(24 * hours)
    assert table_planning.changelog_config(windowed, late[:1])["retention.ms"] == str(24 * hours)
    assert table_planning.changelog_config(windowed, late)["retention.ms"] == str(26 * hours)
    assert table_planning.expiry_warning(windowed, late) is None  # the default follows

    short = tables.TableSpec.model_validate(
        {"window": {"type": "tumbling", "size": "20h", "expiry": "22h"}}, strict=False
    )
    assert table_planning.changelog_config(short, late)["retention.ms"] == str(22 * hours)
    warning = table_planning.expiry_warning(short, late)
    assert warning is not None
    assert "allowedLateness 6h of App views" in warning
    assert "at least 93600s" in warning
    assert table_planning.expiry_warning(short, late[:1]) is None  # 20h + 2h fits in 22h


def test_table_partitions_follow_the_writer() -> None:
    unset = tables.TableSpec.model_validate({}, strict=False)
    writer = table_planning.Writer(app="counter", input_partitions=(6, 6))
    assert table_planning.choose_partitions(unset, [writer]).partitions == 6
    waiting = table_planning.choose_partitions(unset, [])
    assert waiting.partitions is None
    assert waiting.waiting_for is not None
    fixed = tables.TableSpec.model_validate({"partitions": 2}, strict=False)
    mismatch = table_planning.choose_partitions(fixed, [writer])
    assert mismatch.partitions == 2
    assert mismatch.warning is not None
    assert "set spec.partitions to 6" in mismatch.warning
