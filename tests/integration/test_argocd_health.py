"""Argo CD's view of Rillet objects: charts/rillet/argocd/health.lua on real statuses.

The script runs in Lua 5.1 (what Argo CD's gopher-lua implements) via lupa, on objects the real
operator reconciled, as read back from the apiserver (never edited by the test).

Test plan:
- a Ready Topic is Healthy; a conflicting one Degraded with the reason; a paused one Suspended.
- a Topic whose new generation is not yet observed (its operator stopped before the change) is
  Progressing, and Healthy again once the operator is back and has observed it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import lupa.lua51 as lua51
import pytest

from rillet.devstack.operating import OperatorProcess

from .conftest import REPO, Kube
from .objects import apply, get, topic, wait_condition

pytestmark = pytest.mark.usefixtures("operator")

SCRIPT = (REPO / "charts/rillet/argocd/health.lua").read_text()


def argocd_health(obj: dict[str, Any]) -> tuple[str, str]:
    runtime = lua51.LuaRuntime(unpack_returned_tuples=True)
    # Hand the object to Lua as Lua tables, lists 1-based (Argo CD does the same from JSON).
    # Converted on the Python side: a converter written in Lua, calling back into Python per
    # value, failed on objects of a few hundred values (len() came back as userdata).
    runtime.globals().obj = runtime.table_from(json.loads(json.dumps(obj)), recursive=True)
    result = runtime.execute(SCRIPT)
    return str(result["status"]), str(result["message"])


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
