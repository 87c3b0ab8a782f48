"""Pure: the Kafka principal of an App and the ACLs it is granted (least privilege).

With per-App principals on (the chart's `kafka.appPrincipals`), each App logs in to Kafka as a
SCRAM user of its own, `rillet.<namespace>.<app>` (its consumer group's name), allowed exactly
what its spec says it reads and writes:

- READ (which implies DESCRIBE) on the topics of its Topic and Table inputs, and DESCRIBE_CONFIGS
  on its stream inputs (the driver reads their cleanup policy to tell a lost checkpoint);
- WRITE on the topics of its outputs and of its dead-letter Topic, and READ on those written
  exactly-once (their markers are offsets committed on them, which Kafka authorizes as reads);
- READ on its consumer group (offsets committed for lag) and on groups and transactional ids
  under `rillet.<namespace>.<app>.` (Spark's source consumers, transactional producers). The
  trailing dot keeps App `a` from the groups of App `ab`.

Only topics of the App's own namespace's Topic and Table objects are granted. An `external`
input or a dead-letter `topicName` names a topic that belongs to no object here: granting it
would let any namespace read any topic of a shared cluster, so it is left to whoever owns that
topic, and until then Kafka refuses it (the App is Stalled, KafkaAccessDenied).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

from rillet.api.v1alpha1 import apps
from rillet.driverapi import runspecs
from rillet.reconcile import naming

ResourceType = Literal["TOPIC", "GROUP", "TRANSACTIONAL_ID"]
PatternType = Literal["LITERAL", "PREFIXED"]
Operation = Literal["READ", "WRITE", "DESCRIBE_CONFIGS"]

# The keys of an App's Kafka Secret (`<app>-kafka`), and where the driver mounts it.
USERNAME_KEY: Final = "username"
PASSWORD_KEY: Final = "password"
CA_KEY: Final = "ca.crt"
CREDENTIALS_DIR: Final = "/etc/rillet/kafka"


@dataclass(frozen=True, order=True)
class Grant:
    """One ALLOW ACL of an App's principal, on any host."""

    resource_type: ResourceType
    name: str
    pattern: PatternType
    operation: Operation

    def describe(self) -> str:
        """`READ on TOPIC orders`, `READ on GROUP rillet.shop.app.*`: for Events and logs."""
        star = "*" if self.pattern == "PREFIXED" else ""
        return f"{self.operation} on {self.resource_type} {self.name}{star}"


def principal_name(*, namespace: str, app: str) -> str:
    """The SCRAM user of an App (the same name as its consumer group)."""
    return naming.consumer_group(namespace=namespace, app=app)


def principal(user: str) -> str:
    """The principal Kafka's ACLs name for a SCRAM user."""
    return f"User:{user}"


def secret_name(app: str) -> str:
    """The Secret of an App's Kafka credentials, owned by the App."""
    return f"{app}-kafka"


def _topic_grants(topics: Iterable[str], operation: Operation) -> set[Grant]:
    return {Grant("TOPIC", topic, "LITERAL", operation) for topic in topics}


def granted_inputs(app: apps.App, run_spec: runspecs.RunSpec) -> tuple[runspecs.InputSpec, ...]:
    """The run spec's inputs that come from a Topic or Table object (not `external`)."""
    # build_run_spec keeps the order of spec.inputs.
    return tuple(
        item
        for declared, item in zip(app.spec.inputs, run_spec.inputs, strict=True)
        if declared.external is None
    )


def grants(app: apps.App, run_spec: runspecs.RunSpec) -> frozenset[Grant]:
    """Every ACL the App's principal needs, and no other."""
    inputs = granted_inputs(app, run_spec)
    streams = [i.topic for i in inputs if i.kind == "topic"]
    written = [o.topic for o in run_spec.outputs]
    # An exactly-once output's marker is an offset committed on its topic
    # (runtime.queries.transactions), which Kafka authorizes as a read of the topic.
    marked = [o.topic for o in run_spec.outputs if o.exactly_once]
    dead_letter = app.spec.dead_letter_topic
    if dead_letter is not None and dead_letter.topic_ref is not None and run_spec.dead_letter_topic:
        written.append(run_spec.dead_letter_topic)
        if run_spec.dead_letter_exactly_once:
            marked.append(run_spec.dead_letter_topic)
    group = run_spec.consumer_group
    return frozenset(
        _topic_grants((i.topic for i in inputs), "READ")
        | _topic_grants(streams, "DESCRIBE_CONFIGS")
        | _topic_grants(written, "WRITE")
        | _topic_grants(marked, "READ")
        | {
            Grant("GROUP", group, "LITERAL", "READ"),
            Grant("GROUP", f"{group}.", "PREFIXED", "READ"),
            Grant("TRANSACTIONAL_ID", f"{group}.", "PREFIXED", "WRITE"),
        }
    )


@dataclass(frozen=True)
class GrantPlan:
    """What to change so that a principal holds exactly the desired ACLs."""

    create: tuple[Grant, ...]
    delete: tuple[Grant, ...]

    @property
    def empty(self) -> bool:
        return not self.create and not self.delete


def plan_grants(current: Iterable[Grant], desired: Iterable[Grant]) -> GrantPlan:
    """Create what is missing, delete what is no longer wanted (both sorted, for stable logs)."""
    have, want = set(current), set(desired)
    return GrantPlan(create=tuple(sorted(want - have)), delete=tuple(sorted(have - want)))
