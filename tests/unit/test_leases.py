"""Leader election rules: who may take the Lease, and when (rillet.reconcile.leases)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from rillet.reconcile import leases

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 23, 20, 0, 0, 123456, tzinfo=UTC)


def held_by(holder: str | None, renewed: str = "2026-11-23T19:59:59.000000Z") -> leases.LeaseRecord:
    return leases.LeaseRecord.from_spec(
        {"holderIdentity": holder, "renewTime": renewed, "leaseTransitions": 3}
    )


def test_a_free_lease_or_ones_own_may_be_taken_at_once() -> None:
    for record in (held_by(None), held_by("pod-a"), leases.LeaseRecord.from_spec(None)):
        assert leases.may_take(leases.observe(None, record, 100.0), "pod-a", 100.0)


def test_anothers_lease_is_taken_only_after_it_went_unrenewed_for_the_duration() -> None:
    seen = leases.observe(None, held_by("pod-a"), 100.0)
    assert not leases.may_take(seen, "pod-b", 100.0 + leases.DURATION_SECONDS)
    assert leases.may_take(seen, "pod-b", 100.0 + leases.DURATION_SECONDS + 0.1)


def test_a_renewal_restarts_the_wait_on_the_local_clock_whatever_the_holders_clock_says() -> None:
    seen = leases.observe(None, held_by("pod-a", "2026-11-23T19:00:00.000000Z"), 100.0)
    unchanged = leases.observe(seen, held_by("pod-a", "2026-11-23T19:00:00.000000Z"), 105.0)
    assert unchanged == seen
    # The holder's renewTime is an hour old by our clock: skew, not expiry. Only the change counts.
    renewed = leases.observe(seen, held_by("pod-a", "2026-11-23T19:00:07.000000Z"), 107.0)
    assert not leases.may_take(renewed, "pod-b", 107.0 + leases.DURATION_SECONDS)


def test_taking_a_lease_counts_a_transition_and_renewing_keeps_acquire_time() -> None:
    taken = leases.claimed_spec(
        {"holderIdentity": "pod-a", "leaseTransitions": 3, "acquireTime": "old"}, "pod-b", NOW
    )
    assert taken == {
        "holderIdentity": "pod-b",
        "leaseDurationSeconds": leases.DURATION_SECONDS,
        "renewTime": "2026-11-23T20:00:00.123456Z",
        "acquireTime": "2026-11-23T20:00:00.123456Z",
        "leaseTransitions": 4,
    }
    renewed = leases.claimed_spec(taken, "pod-b", NOW.replace(second=2))
    assert renewed["acquireTime"] == taken["acquireTime"]
    assert renewed["leaseTransitions"] == 4
    assert renewed["renewTime"] == "2026-11-23T20:00:02.123456Z"
    assert leases.claimed_spec(None, "pod-a", NOW)["leaseTransitions"] == 0


def test_a_released_lease_is_free_for_the_next_replica() -> None:
    released = leases.released_spec({"holderIdentity": "pod-a", "leaseTransitions": 4}, NOW)
    record = leases.LeaseRecord.from_spec(released)
    assert record.holder is None
    assert record.transitions == 4
    assert leases.may_take(leases.observe(None, record, 0.0), "pod-b", 0.0)


def test_a_leader_gives_up_before_a_standby_may_take_over() -> None:
    # The last call a leader makes starts before its deadline and ends within the request timeout.
    slowest_call = sum(leases.REQUEST_TIMEOUT)
    assert leases.RENEW_DEADLINE_SECONDS + slowest_call < leases.DURATION_SECONDS
    # A crashed leader's lease expires soon enough for the 15 s failover the chart promises.
    assert leases.DURATION_SECONDS + leases.RETRY_SECONDS <= 10
