"""The GitOps examples (examples/gitops) as a GitOps tool renders them: `kubectl kustomize` (the
kustomize built into the stack's kubectl) and `helm template` (for the chart values the Flux
HelmRelease and the Argo CD Application pass), for test_gitops_examples.py and
test_gitops_tools.py."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from rillet_devstack import provisioning, tools

from .conftest import REPO

GITOPS = REPO / "examples" / "gitops"
BASE = GITOPS / "base"
OVERLAY = GITOPS / "overlays" / "production"
CHART = REPO / "charts" / "rillet"
HEALTH_LUA = CHART / "argocd" / "health.lua"
PLACEHOLDER_REPOSITORY = "https://git.example.com/YOUR-ORG/rillet.git"
FIELD_MANAGER = "rillet-tests"

Key = tuple[str, str]  # (kind, name)


def kustomize(directory: Path) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize <directory>` renders."""
    result = subprocess.run(
        [str(tools.kubectl()), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, f"kubectl kustomize {directory} failed: {result.stderr}"
    return [document for document in yaml.safe_load_all(result.stdout) if document]


def by_key(documents: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for d in documents}


def helm_template(values: dict[str, Any], tmp_path: Path) -> list[dict[str, Any]]:
    """The chart rendered with `values`, which its values.schema.json must accept."""
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    helm = provisioning.provision(provisioning.HELM) / "helm"
    result = subprocess.run(
        [
            str(helm),
            "template",
            "rillet",
            str(CHART),
            "--namespace",
            "rillet-system",
            "-f",
            str(path),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, f"the chart refused the values {values}: {result.stderr}"
    return [document for document in yaml.safe_load_all(result.stdout) if document]
