"""Argo CD's view of Rillet objects: charts/rillet/argocd/health.lua on real statuses.

The script runs in gopher-lua, the Lua VM Argo CD embeds, on the object converted as Argo CD
converts it (tests/gitopshealth, through `gitopshealth.argocd_health`), on objects the real
operator reconciled, as read back from the apiserver (never edited by the test).

Test plan:
- a Ready Topic is Healthy; a conflicting one Degraded with the reason; a paused one Suspended.
- a Topic whose new generation is not yet observed (its operator stopped before the change) is
  Progressing, and Healthy again once the operator is back and has observed it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rillet_devstack.operating import OperatorProcess

from .conftest import Kube
from .gitopshealth import argocd_health
from .objects import apply, get, topic, wait_condition

pytestmark = pytest.mark.usefixtures("operator")


def test_health_follows_the_conditions(kube: Kube, namespace: str, kafka_prefix: str) -> None:
    name = f"{kafka_prefix}-health"
    apply(kube, topic(name, namespace))
    ready = wait_condition(kube, "topic", name, namespace)
    assert argocd_health(ready)[0] == "Healthy"

    rival = f"{kafka_prefix}-rival"
    apply(kube, topic(rival, namespace, topicName=name))
    stalled = wait_condition(
        kube, "topic", rival, namespace, condition_type="Stalled", reason="TopicConflict"
    )
    status, message = argocd_health(stalled)
    assert status == "Degraded"
    assert message.startswith("TopicConflict: ")

    kube.kubectl("annotate", "topic", name, "-n", namespace, "rillet.io/paused=true")
    paused = wait_condition(
        kube,
        "topic",
        name,
        namespace,
        condition_type="Reconciling",
        status="False",
        reason="ReconciliationPaused",
    )
    assert argocd_health(paused)[0] == "Suspended"


def test_a_generation_not_yet_observed_is_progressing(
    kube: Kube, kafka_prefix: str, lone_operator: Callable[..., OperatorProcess]
) -> None:
    own = lone_operator()
    own.start()
    namespace, name = own.namespace_pattern, f"{kafka_prefix}-stale"
    apply(kube, topic(name, namespace))
    assert argocd_health(wait_condition(kube, "topic", name, namespace))[0] == "Healthy"

    own.stop()  # nothing reconciles the namespace now
    kube.kubectl(
        "patch", "topic", name, "-n", namespace, "--type=merge", "-p", '{"spec": {"partitions": 2}}'
    )
    changed = get(kube, "topic", name, namespace)
    assert changed["status"]["observedGeneration"] == changed["metadata"]["generation"] - 1
    assert argocd_health(changed)[0] == "Progressing"

    own.start()
    assert argocd_health(wait_condition(kube, "topic", name, namespace))[0] == "Healthy"
