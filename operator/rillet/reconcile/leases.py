"""Leader election over a coordination.k8s.io Lease: when a replica may take the lease.

Two operator replicas must never reconcile at once (two writers would race on Kafka and write
Events twice), so only the holder of one Lease runs kopf; the others stand by. The rules are
client-go's (`k8s.io/client-go/tools/leaderelection`), the ones every Go controller follows:

- A lease is free when nobody holds it (a leader that stopped cleanly released it).
- Otherwise it expires `duration` seconds after this replica last saw it *change*, measured on
  this replica's own monotonic clock: the holder's `renewTime` is never compared with the local
  clock, so clock skew between nodes cannot hand the lease over early.
- A leader that cannot renew within `renew_deadline` (< `duration`) stops at once, before any
  standby can see the lease expire: the two never overlap.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

# Crash failover takes DURATION to DURATION + RETRY seconds, plus kopf's start (a few seconds):
# within the 15 s the chart promises. A clean stop releases the lease: a standby takes it within
# RETRY. A leader stops renewing at the latest RENEW_DEADLINE + one request after the start of
# its last renewal, and no standby can take over before DURATION after that renewal: REQUEST
# (connect, read) keeps every call short enough for the two never to overlap.
DURATION_SECONDS: Final = 7
RENEW_DEADLINE_SECONDS: Final = 3.5
RETRY_SECONDS: Final = 1.0
REQUEST_TIMEOUT: Final = (1.0, 2.0)


@dataclass(frozen=True)
class LeaseRecord:
    """What a Lease's spec says about its holder."""

    holder: str | None
    renew_time: str | None
    transitions: int

    @classmethod
    def from_spec(cls, spec: dict[str, Any] | None) -> LeaseRecord:
        spec = spec or {}
        return cls(
            holder=spec.get("holderIdentity") or None,
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
        )


@dataclass(frozen=True)
class Observation:
    """A record as this replica last saw it change, and when (its monotonic clock)."""

    record: LeaseRecord
    seen_at: float


def observe(previous: Observation | None, record: LeaseRecord, now: float) -> Observation:
    """The new observation: its clock restarts only when the record changed (a renewal)."""
    if previous is not None and previous.record == record:
        return previous
    return Observation(record=record, seen_at=now)


def may_take(observation: Observation, identity: str, now: float) -> bool:
    """Whether `identity` may write itself into the lease now."""
    holder = observation.record.holder
    if holder is None or holder == identity:
        return True
    return now - observation.seen_at > DURATION_SECONDS


def claimed_spec(current: dict[str, Any] | None, identity: str, now: datetime) -> dict[str, Any]:
    """The whole spec that makes `identity` the holder; a renewal keeps acquireTime and the
    transition count."""
    spec = dict(current or {})
    record = LeaseRecord.from_spec(spec)
    stamp = micro_time(now)
    if record.holder != identity:
        spec["acquireTime"] = stamp
        spec["leaseTransitions"] = record.transitions + (1 if record.holder else 0)
    spec.update(holderIdentity=identity, leaseDurationSeconds=DURATION_SECONDS, renewTime=stamp)
    return spec


def released_spec(current: dict[str, Any] | None, now: datetime) -> dict[str, Any]:
    """What a leader that stops cleanly leaves: no holder, so a standby need not wait it out."""
    spec = dict(current or {})
    spec.update(holderIdentity=None, leaseDurationSeconds=1, renewTime=micro_time(now))
    return spec


def micro_time(moment: datetime) -> str:
    """Kubernetes MicroTime: RFC 3339 with microseconds, in UTC."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
