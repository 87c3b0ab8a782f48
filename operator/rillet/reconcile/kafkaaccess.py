"""Pure: the Kafka principal of an App and the ACLs it is granted (least privilege).

With per-App principals on (the chart's `kafka.appPrincipals`), each App logs in to Kafka as a
SCRAM user of its own, `rillet.<cluster>.<namespace>.<app>`, allowed exactly what its spec says
it reads and writes. `<cluster>` is the first 8 hex digits of the uid of the Kubernetes cluster's
`kube-system` namespace: two clusters sharing one Kafka never share a user for Apps of the same
namespace and name. (Dots separate the parts: a namespace has none, so a name parses back.) An
App whose Secret records another username (one made before the cluster id, `rillet.<ns>.<app>`)
keeps it: a live principal is never renamed.

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
# Rotation: a new token on the App's annotation gets a new password; the Secret records the
# token it was made for, and the driver pod template carries it (so the driver rolls).
ROTATE_ANNOTATION: Final = "rillet.io/rotate-credentials"
ROTATED_ANNOTATION: Final = "rillet.io/rotated-credentials"
CLUSTER_ID_LENGTH: Final = 8
USER_PREFIX: Final = "rillet"


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


def cluster_id(namespace_uid: str) -> str:
    """The short id of a Kubernetes cluster, from the uid of its `kube-system` namespace."""
    digits = namespace_uid.replace("-", "").lower()
    if len(digits) < CLUSTER_ID_LENGTH or any(c not in "0123456789abcdef" for c in digits):
        raise ValueError(f"not a uid: {namespace_uid!r}")
    return digits[:CLUSTER_ID_LENGTH]


def principal_name(*, cluster: str, namespace: str, app: str) -> str:
    """The SCRAM user Rillet makes for an App of the cluster `cluster` (see cluster_id).

    No length limit binds: Kafka stores SCRAM users of any length, and Kubernetes names (a
    namespace of 63 characters at most, an App of 253) keep it short enough for ACLs and logs.
    """
    return f"{USER_PREFIX}.{cluster}.{namespace}.{app}"


def app_usernames(*, cluster: str, namespace: str, app: str) -> tuple[str, str]:
    """The usernames Rillet gives an App: the current one, and the one before cluster ids
    (`rillet.<namespace>.<app>`)."""
    legacy = naming.consumer_group(namespace=namespace, app=app)
    return principal_name(cluster=cluster, namespace=namespace, app=app), legacy


def username_of(recorded: str | None, *, cluster: str, namespace: str, app: str) -> str | None:
    """The App's user given the username its Secret records: that one, if Rillet gives it to
    this App (a Secret made before cluster ids keeps `rillet.<ns>.<app>`: a live principal is
    never renamed); the current name if none is recorded; None for any other (a Secret Rillet
    did not write: it could name the operator's own user, or another App's)."""
    names = app_usernames(cluster=cluster, namespace=namespace, app=app)
    if recorded is None:
        return names[0]
    return recorded if recorded in names else None


def owner_of(user: str, *, cluster: str) -> tuple[str, str] | None:
    """(namespace, app) of a user principal_name made for `cluster`; None for any other user
    (another cluster's, one made before cluster ids, one made by hand)."""
    parts = user.split(".", 3)
    if len(parts) != 4 or parts[:2] != [USER_PREFIX, cluster] or not all(parts[2:]):
        return None
    return parts[2], parts[3]


def rotation_due(*, requested: str | None, recorded: str | None) -> bool:
    """Whether the App asks for a new password: its token differs from the Secret's."""
    return bool(requested) and requested != recorded


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
