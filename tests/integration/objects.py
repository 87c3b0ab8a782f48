"""Rillet objects written as a GitOps tool writes them (server-side apply) and read as the tests
poll them, both in-process on the stack's API (kubeapi.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .conftest import Kube
from .polling import wait_for


def apply(kube: Kube, *manifests: dict[str, Any]) -> None:
    """Server-side apply, as a GitOps tool would (Flux's controllers send the same request)."""
    for manifest in manifests:
        kube.api.apply(manifest, field_manager="tests")


# The Lease replicas of the operator elect their leader with (the chart's and the settings'
# default name).
LEASE = "rillet-operator"


def lease_holder(kube: Kube, namespace: str) -> str | None:
    """Who holds the operator's Lease in `namespace` (None: no Lease, or released)."""
    lease = kube.api.read("lease", LEASE, namespace)
    if lease is None:
        return None
    return lease["spec"].get("holderIdentity")  # type: ignore[no-any-return]


def get(kube: Kube, kind: str, name: str, namespace: str) -> dict[str, Any]:
    found = kube.api.read(kind, name, namespace)
    assert found is not None, f"no {kind} {namespace}/{name}"
    return found


def exists(kube: Kube, kind: str, name: str, namespace: str) -> bool:
    return kube.api.read(kind, name, namespace) is not None


def condition(obj: dict[str, Any], condition_type: str) -> dict[str, Any]:
    for found in (obj.get("status") or {}).get("conditions") or []:
        if found["type"] == condition_type:
            return found  # type: ignore[no-any-return]
    return {}


def wait_condition(
    kube: Kube,
    kind: str,
    name: str,
    namespace: str,
    *,
    condition_type: str = "Ready",
    status: str = "True",
    reason: str | None = None,
    timeout: float = 60,
) -> dict[str, Any]:
    """Wait until the object's condition has this status (and reason); return the object.
    A timeout names the condition last seen."""
    seen: list[dict[str, Any]] = []

    def probe() -> dict[str, Any] | None:
        obj = get(kube, kind, name, namespace)
        found = condition(obj, condition_type)
        seen[:] = [found]
        generation = obj["metadata"].get("generation")
        current = (obj.get("status") or {}).get("observedGeneration") == generation
        matches = found.get("status") == status and (
            reason is None or found.get("reason") == reason
        )
        return obj if matches and current else None

    try:
        return wait_for(
            probe,
            timeout=timeout,
            what=f"{kind} {namespace}/{name} {condition_type}={status}"
            + (f" ({reason})" if reason else ""),
        )
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}; {condition_type} condition last seen: {seen}") from None


def events(kube: Kube, namespace: str, name: str) -> list[dict[str, Any]]:
    return kube.api.list("event", namespace, fields=f"involvedObject.name={name}")


def wait_event(
    kube: Kube, namespace: str, name: str, reason: str, *, saying: str = "", timeout: float = 30
) -> dict[str, Any]:
    """Wait for an Event of `reason` (whose message contains `saying`) on the object; return it.

    Polled, never read once: kopf posts Events from a queue of its own, after the handler's
    status patch, so a test that has just seen the condition may ask before the Event is there.
    """

    def probe() -> dict[str, Any] | None:
        found = [
            e
            for e in events(kube, namespace, name)
            if e.get("reason") == reason and saying in (e.get("message") or "")
        ]
        return found[-1] if found else None

    return wait_for(probe, timeout=timeout, interval=0.5, what=f"a {reason} Event on {name}")


def topic(name: str, namespace: str, *, partitions: int = 1, **spec: Any) -> dict[str, Any]:
    """A Topic manifest."""
    return {
        "apiVersion": "rillet.io/v1alpha1",
        "kind": "Topic",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"partitions": partitions, **spec},
    }


# An image for Apps that never get as far as a running driver (tests on the node pass theirs).
IMAGE = "rillet/spark-runtime:0.1.0"


def table(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    """A Table manifest (JSON values of word and count, unless `spec` says otherwise)."""
    return {
        "apiVersion": "rillet.io/v1alpha1",
        "kind": "Table",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"valueFormat": "json", "valueSchema": "word STRING, n BIGINT", **spec},
    }


def app(name: str, namespace: str, *, reads: str, writes: str, **spec: Any) -> dict[str, Any]:
    """An App counting the values of a Topic into a Table."""
    return {
        "apiVersion": "rillet.io/v1alpha1",
        "kind": "App",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "image": IMAGE,
            "inputs": [{"name": "src", "topicRef": {"name": reads}, "format": "string"}],
            "pipeline": {"sql": "SELECT value AS word, count(*) AS n FROM src GROUP BY value"},
            "outputs": [{"tableRef": {"name": writes}, "keyColumns": ["word"]}],
            **spec,
        },
    }


def applied_app(
    kube: Kube, namespace: str, unique: Callable[[str], str], suffix: str = "", **spec: Any
) -> tuple[str, dict[str, Any]]:
    """A Topic, a Table and the App between them, applied; the App once past its references."""
    words, counts, name = (
        unique(f"words{suffix}"),
        unique(f"counts{suffix}"),
        unique(f"app{suffix}"),
    )
    apply(
        kube,
        topic(words, namespace, partitions=spec.pop("partitions", 2)),
        table(counts, namespace),
        app(name, namespace, reads=words, writes=counts, **spec),
    )
    found = wait_for(
        lambda: (
            (obj := get(kube, "app", name, namespace)).get("status", {}).get("executors")
            and condition(obj, "Ready").get("reason") not in (None, "WaitingForTopics")
            and obj
        ),
        timeout=60,
        what=f"App {name} past its references",
    )
    return name, found
