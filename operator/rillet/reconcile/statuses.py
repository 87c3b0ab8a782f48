"""Deriving an object's status from the outcome of a reconcile.

Three condition types, as kstatus readers (Flux, Argo CD with Rillet's health check, `kubectl
wait`) read them: Ready, Reconciling (working on it), Stalled (needs the user). A condition's
lastTransitionTime moves only when its status changes, so an unchanged outcome derives an
identical status and no write is needed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from rillet.api.v1alpha1 import conditions
from rillet.reconcile.topics import ObservedTopic, SyncOutcome

State = Literal["ready", "progressing", "stalled", "paused", "unmanaged"]


@dataclass(frozen=True)
class Verdict:
    """Where the object stands, in one CamelCase reason and a message that says what to do."""

    state: State
    reason: str
    message: str


# (Ready, Reconciling, Stalled) per state; None: keep Ready if it was True, else leave it out.
# A paused object is neither Reconciling nor Stalled. Writing Ready False or Unknown for it would
# make kstatus (Flux) call it InProgress until it is resumed, hanging every health check that
# waits on it; with no Ready, kstatus calls it Current, and Argo CD shows it Suspended (health.lua
# reads the pause itself). A Ready True is kept: Apps reading the Topic, and its claim on the
# Kafka topic, go on while it is paused (docs/health.md).
_STATUSES: dict[State, tuple[str | None, str, str]] = {
    "ready": ("True", "False", "False"),
    "unmanaged": ("True", "False", "False"),
    "progressing": ("False", "True", "False"),
    "stalled": ("False", "False", "True"),
    "paused": (None, "False", "False"),
}


def derive_conditions(
    verdict: Verdict,
    *,
    generation: int | None,
    previous: Sequence[Mapping[str, Any]] | None,
    now: datetime,
) -> list[dict[str, Any]]:
    """The conditions for `verdict`, keeping transition times of unchanged statuses: all three,
    but a paused object's Ready only if it was True."""
    before = {c["type"]: c for c in previous or ()}
    ready, reconciling, stalled = _STATUSES[verdict.state]
    if ready is None and before.get(conditions.READY, {}).get("status") == "True":
        ready = "True"
    derived = []
    for condition_type, status in (
        (conditions.READY, ready),
        (conditions.RECONCILING, reconciling),
        (conditions.STALLED, stalled),
    ):
        if status is None:
            continue
        old = before.get(condition_type)
        changed = old is None or old.get("status") != status
        condition: dict[str, Any] = {
            "type": condition_type,
            "status": status,
            "reason": verdict.reason,
            "message": verdict.message,
            "lastTransitionTime": (
                _timestamp(now) if old is None or changed else old["lastTransitionTime"]
            ),
        }
        if generation is not None:
            condition["observedGeneration"] = generation
        derived.append(condition)
    return derived


def clip(message: str, limit: int) -> str:
    """`message` cut to `limit` characters, marked as cut: a condition the apiserver refuses
    for its length (Kafka's errors quote the refused value, up to 8 KiB each) says nothing."""
    return message if len(message) <= limit else message[: limit - 1] + "…"


def standing_condition(found: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    """The condition that says where the object last stood: Ready, or, when a paused object has
    none, Stalled (all carry the same reason and message). {} when there is none."""
    by_type = {c.get("type"): c for c in found or ()}
    return dict(by_type.get(conditions.READY) or by_type.get(conditions.STALLED) or {})


def _timestamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def topic_status(
    verdict: Verdict,
    *,
    kafka_name: str,
    observed: ObservedTopic | None,
    generation: int | None,
    previous: Mapping[str, Any] | None,
    now: datetime,
) -> dict[str, Any]:
    """The status of a Topic (or the topic part of a Table's), in wire form."""
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "conditions": derive_conditions(
            verdict,
            generation=generation,
            previous=(previous or {}).get("conditions"),
            now=now,
        ),
        "topicName": kafka_name,
    }
    if observed is not None:
        status |= {
            "topicId": observed.topic_id,
            "partitions": observed.partitions,
            "replicationFactor": observed.replication_factor,
            "config": dict(sorted(observed.overrides.items())),
        }
    return {key: value for key, value in status.items() if value is not None}


def unavailable_message(reason: str) -> str:
    """What to check when Kafka does not answer: the credentials when it refused the login,
    the CA when TLS failed (kafka.admin leads the client's reason with which), else the
    address."""
    if "Kafka refused the operator's login" in reason:
        advice = (
            "Check the chart values kafka.credentialsSecret (its username and password) and "
            "kafka.saslMechanism"
        )
    elif "TLS with the brokers failed" in reason:
        advice = (
            "Check the chart value kafka.caSecret (the CA that signed the brokers' certificates)"
        )
    else:
        advice = "Check the bootstrap servers in the operator's settings and that the brokers run"
    return f"{reason}; retrying. {advice}."


def topic_verdict(outcome: SyncOutcome, *, kafka_name: str) -> Verdict:
    """Where a topic stands after a sync."""
    if outcome.unavailable is not None:
        return Verdict("progressing", "KafkaUnavailable", unavailable_message(outcome.unavailable))
    if outcome.problems:
        return Verdict(
            "stalled",
            outcome.problems[0].reason,
            clip(
                " ".join(problem.message for problem in outcome.problems),
                conditions.MAX_MESSAGE_LENGTH,
            ),
        )
    if outcome.observed is None:
        return Verdict("progressing", "TopicPending", f"Kafka topic {kafka_name} not seen yet")
    if outcome.lagging:
        return Verdict(
            "progressing",
            "TopicPending",
            f"Kafka accepted the change of topic {kafka_name}, but its metadata does not show it "
            "yet; checking again at the next resync",
        )
    observed = outcome.observed
    return Verdict(
        "ready",
        "TopicReady",
        f"Kafka topic {kafka_name} has {observed.partitions} partitions, replication factor "
        f"{observed.replication_factor}, and the declared config",
    )


def merge_patch(previous: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that turns `previous` into `desired`; empty if equal."""
    patch: dict[str, Any] = {}
    for key, value in desired.items():
        old = previous.get(key)
        if isinstance(value, Mapping) and isinstance(old, Mapping):
            nested = merge_patch(old, value)
            if nested:
                patch[key] = nested
        elif old != value:
            patch[key] = value
    for key in previous.keys() - desired.keys():
        patch[key] = None
    return patch


def is_due(body: Mapping[str, Any]) -> bool:
    """Whether the resync should look at an object: settled ones only.

    An object being deleted is its delete handler's; one whose current generation has no
    reconcile yet (observedGeneration behind) is its kopf handler's, which retries on its own.
    Taking those too would reconcile every new object twice during a bulk apply.
    """
    metadata = body["metadata"]
    observed = (body.get("status") or {}).get("observedGeneration")
    return not metadata.get("deletionTimestamp") and observed == metadata.get("generation")
