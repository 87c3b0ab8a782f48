"""Argo CD's view of Rillet objects: charts/rillet/argocd/health.lua on real statuses.

The script runs in Lua 5.1 (what Argo CD's gopher-lua implements) via lupa, on objects the real
operator reconciled.

Test plan:
- a Ready Topic is Healthy; a conflicting one Degraded with the reason; a paused one Suspended.
- a Topic whose new generation is not yet observed is Progressing.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import lupa.lua51 as lua51
import pytest

from .conftest import REPO, Kube
from .objects import apply, get, topic, wait_condition

pytestmark = pytest.mark.usefixtures("operator")

SCRIPT = (REPO / "charts/rillet/argocd/health.lua").read_text()


def argocd_health(obj: dict[str, Any]) -> tuple[str, str]:
    runtime = lua51.LuaRuntime(unpack_returned_tuples=True)
    # Hand the object to Lua as Lua tables (Argo CD does the same from JSON).
    to_lua = runtime.eval(
        """
        function(py)
          local function convert(value)
            if python.builtins.isinstance(value, python.builtins.dict) then
              local t = {}
              for k in python.iter(value) do t[k] = convert(value[k]) end
              return t
            elseif python.builtins.isinstance(value, python.builtins.list) then
              local t = {}
              for i = 0, python.builtins.len(value) - 1 do t[i + 1] = convert(value[i]) end
              return t
            end
            return value
          end
          return convert(py)
        end
        """
    )
    runtime.globals().obj = to_lua(json.loads(json.dumps(obj)))
    result = runtime.execute(SCRIPT)
    return str(result["status"]), str(result["message"])


def test_health_follows_the_conditions(kube: Kube, namespace: str) -> None:
    name = f"health-{uuid.uuid4().hex[:8]}"
    apply(kube, topic(name, namespace))
    ready = wait_condition(kube, "topic", name, namespace)
    assert argocd_health(ready)[0] == "Healthy"

    rival = f"rival-{uuid.uuid4().hex[:8]}"
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

    kube.kubectl(
        "patch", "topic", name, "-n", namespace, "--type=merge", "-p", '{"spec": {"partitions": 2}}'
    )
    changed = get(kube, "topic", name, namespace)
    changed["status"]["observedGeneration"] = changed["metadata"]["generation"] - 1
    assert argocd_health(changed)[0] == "Progressing"
