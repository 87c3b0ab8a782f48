"""The Flux and Argo CD objects of the GitOps examples (examples/gitops) name what exists, with
values the chart accepts and the health checks it ships.

Test plan:
- Flux: the objects of flux/ and flux/operator/ render; every Kustomization reads the
  GitRepository at a path that exists, renders and is not ignored by it, waits for health
  (`wait: true`) within a timeout and depends only on Kustomizations defined here; the
  production one applies the overlay after rillet-operator, whose HelmRelease installs and
  upgrades the chart's CRDs, with values the chart's schema accepts (`helm template`).
- Argo CD: both Applications read the placeholder repository at a path that exists (the chart,
  with values the chart accepts; the overlay, into the namespace it renders to) with
  ServerSideApply; argocd/argocd-cm.yaml has one key per kind of crds/,
  resource.customizations.health.<group>_<Kind>, each holding charts/rillet/argocd/health.lua
  as shipped.
- every object that names the repository names the same obvious placeholder.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from .conftest import REPO
from .gitopsrendering import (
    CHART,
    GITOPS,
    HEALTH_LUA,
    OVERLAY,
    PLACEHOLDER_REPOSITORY,
    Key,
    by_key,
    helm_template,
    kustomize,
)

# --- Flux ----------------------------------------------------------------------------------------


def _flux() -> dict[Key, dict[str, Any]]:
    return by_key(kustomize(GITOPS / "flux") + kustomize(GITOPS / "flux" / "operator"))


def _repository_path(path: str) -> Path:
    """A path as Flux reads it: relative to the root of the GitRepository's checkout."""
    assert path.startswith("./"), path
    return REPO / path[2:]


def _not_ignored(path: str, ignore: str) -> bool:
    """Whether a path survives the GitRepository's ignore rules as written here: `/*`, then the
    top-level directories it brings back (`!/<dir>/`)."""
    kept = {line[2:].strip("/") for line in ignore.split() if line.startswith("!/")}
    return ignore.split()[0] == "/*" and path.removeprefix("./").split("/")[0] in kept


def test_flux_kustomizations_read_paths_that_exist_and_wait_for_health() -> None:
    flux = _flux()
    (repository,) = [d for (kind, _), d in flux.items() if kind == "GitRepository"]
    kustomizations = {name: d for (kind, name), d in flux.items() if kind == "Kustomization"}

    assert set(kustomizations) == {"rillet-operator", "wordcount-production"}
    for name, kustomization in kustomizations.items():
        spec = kustomization["spec"]
        assert spec["sourceRef"] == {
            "kind": "GitRepository",
            "name": repository["metadata"]["name"],
        }
        assert kustomization["metadata"]["namespace"] == repository["metadata"]["namespace"]
        assert _repository_path(spec["path"]).is_dir(), name
        assert _not_ignored(spec["path"], repository["spec"]["ignore"]), name
        kustomize(_repository_path(spec["path"]))  # Flux builds the path with kustomize
        assert spec["wait"] is True, name  # kstatus on every object applied
        assert spec["timeout"], name
        assert spec["prune"] is True, name
        for dependency in spec.get("dependsOn", []):
            assert dependency["name"] in kustomizations, name

    production = kustomizations["wordcount-production"]["spec"]
    assert _repository_path(production["path"]) == OVERLAY
    assert production["dependsOn"] == [{"name": "rillet-operator"}]
    operator = kustomize(_repository_path(kustomizations["rillet-operator"]["spec"]["path"]))
    assert [(d["kind"], d["metadata"]["name"]) for d in operator] == [("HelmRelease", "rillet")]


def test_flux_helmrelease_installs_the_chart_and_its_crds_with_valid_values(
    tmp_path: Path,
) -> None:
    flux = _flux()
    release = flux["HelmRelease", "rillet"]["spec"]
    repository = flux["GitRepository", "rillet"]

    chart = release["chart"]["spec"]
    assert _repository_path(chart["chart"]) == CHART
    assert _not_ignored(chart["chart"], repository["spec"]["ignore"])
    assert chart["sourceRef"] == {"kind": "GitRepository", "name": "rillet"}
    assert release["install"]["crds"] == release["upgrade"]["crds"] == "CreateReplace"
    rendered = helm_template(release["values"], tmp_path)
    assert any(d["kind"] == "Deployment" for d in rendered)


# --- Argo CD -------------------------------------------------------------------------------------


def _applications() -> dict[str, dict[str, Any]]:
    return {name: d for (_, name), d in by_key(kustomize(GITOPS / "argocd")).items()}


def test_argocd_applications_read_paths_that_exist_with_server_side_apply(
    tmp_path: Path,
) -> None:
    applications = _applications()

    assert set(applications) == {"rillet-operator", "wordcount-production"}
    for name, application in applications.items():
        assert application["kind"] == "Application"
        source = application["spec"]["source"]
        assert (REPO / source["path"]).is_dir(), name
        assert "ServerSideApply=true" in application["spec"]["syncPolicy"]["syncOptions"], name

    operator = applications["rillet-operator"]["spec"]
    assert REPO / operator["source"]["path"] == CHART
    rendered = helm_template(operator["source"]["helm"]["valuesObject"], tmp_path)
    assert any(d["kind"] == "Deployment" for d in rendered)
    assert "CreateNamespace=true" in operator["syncPolicy"]["syncOptions"]

    production = applications["wordcount-production"]["spec"]
    assert REPO / production["source"]["path"] == OVERLAY
    namespaces = {
        d["metadata"]["namespace"] for d in kustomize(OVERLAY) if d["kind"] != "Namespace"
    }
    assert namespaces == {production["destination"]["namespace"]}


def _crd_kinds() -> Iterator[tuple[str, str]]:
    for path in sorted((REPO / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        yield crd["spec"]["group"], crd["spec"]["names"]["kind"]


def test_argocd_cm_carries_the_shipped_health_check_for_each_kind() -> None:
    config_map = yaml.safe_load((GITOPS / "argocd" / "argocd-cm.yaml").read_text(encoding="utf-8"))
    shipped = HEALTH_LUA.read_text(encoding="utf-8")

    assert (config_map["kind"], config_map["metadata"]["name"]) == ("ConfigMap", "argocd-cm")
    assert set(config_map["data"]) == {
        f"resource.customizations.health.{group}_{kind}" for group, kind in _crd_kinds()
    }
    for key, script in config_map["data"].items():
        assert script == shipped, (
            f"{key} in examples/gitops/argocd/argocd-cm.yaml is not {HEALTH_LUA.name} as "
            "shipped: copy it again (indented under the key)"
        )


def test_every_reference_to_the_repository_is_the_placeholder() -> None:
    flux = _flux()
    urls = [d["spec"]["url"] for (kind, _), d in flux.items() if kind == "GitRepository"]
    urls += [d["spec"]["source"]["repoURL"] for d in _applications().values()]

    assert urls
    assert set(urls) == {PLACEHOLDER_REPOSITORY}
