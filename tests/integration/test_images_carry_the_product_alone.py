"""The project's images carry the product, not the development stack beside it.

Test plan:
- a pod of each project image (operator, runtime) lists its Python's site-packages and the
  command groups of its `rillet` command line: `rillet` is installed, `rillet_devstack` is not,
  and there is no `rillet dev` (its entry point is declared, its package absent).
"""

from __future__ import annotations

import json

import pytest

from .conftest import Kube
from .objects import get
from .polling import wait_for

LIST_PACKAGES = """
import os, site
import rillet.cli
for folder in site.getsitepackages():
    if os.path.isdir(folder):
        for name in sorted(os.listdir(folder)):
            print("package", name)
print("groups", *sorted(group.name for group in rillet.cli.app.registered_groups))
"""


def _listing(kube: Kube, namespace: str, *, name: str, image: str) -> list[list[str]]:
    """Run a pod of the image that lists its packages; the lines it printed, split in words."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["python3", "-c", LIST_PACKAGES],
                }
            ],
        },
    }
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(pod))
    phase = wait_for(
        lambda: (
            p
            if (p := get(kube, "pod", name, namespace).get("status", {}).get("phase"))
            in ("Succeeded", "Failed")
            else None
        ),
        timeout=120,
        interval=1,
        what=f"pod {namespace}/{name} to finish",
    )
    logs = kube.kubectl("logs", "-n", namespace, name).stdout
    assert phase == "Succeeded", f"pod {name} {phase}:\n{logs[-3000:]}"
    return [line.split() for line in logs.splitlines()]


@pytest.mark.parametrize("name", ["operator", "runtime"])
def test_an_image_has_rillet_and_not_the_development_stack(
    kube: Kube, namespace: str, name: str, operator_image: str, runtime_image: str
) -> None:
    image = {"operator": operator_image, "runtime": runtime_image}[name]
    lines = _listing(kube, namespace, name=f"{name}-packages", image=image)
    packages = {words[1] for words in lines if words[:1] == ["package"] and len(words) == 2}
    assert "rillet" in packages, sorted(packages)
    assert not [p for p in packages if p.startswith("rillet_devstack")], sorted(packages)
    (groups,) = [words[1:] for words in lines if words[:1] == ["groups"]]
    assert "dev" not in groups
    assert {"operator", "crds"} <= set(groups)
