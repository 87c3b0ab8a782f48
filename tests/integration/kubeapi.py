"""The stack's Kubernetes API in-process: what the tests do hundreds of times (poll, apply,
make and clean up namespaces).

A kubectl call costs about 0.1 CPU-second on this machine (a Go binary started, its kubeconfig
and discovery cache read: measured on November 27, 2026). The suite made 4,289 of them, 338
CPU-seconds, most from probes polled every 0.2 s: a third of a core for each test that waited,
on the 2 cores the pods and Spark need. A request on the Python client's kept-alive connection
costs about 1 ms. What a test checks kubectl itself for (printer columns, short names, explain,
auth, logs, exec, a user's edit) stays on kubectl (`Kube.kubectl`).

`Kube`, the `kube` fixture's value, gives a test both: the stack's kubectl and this API.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

from rillet.api.v1alpha1.objects import API_VERSION
from rillet.k8s import rest
from rillet_devstack import tools


def group_path(group_version: str) -> str:
    """Where the API serves a group version: `/api/v1`, `/apis/apps/v1`."""
    return f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"


@dataclass(frozen=True)
class Resource:
    """Where the API serves one kind."""

    group_version: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None, name: str | None = None) -> str:
        parts = [group_path(self.group_version)]
        if self.namespaced and namespace is not None:
            parts += ["namespaces", namespace]
        parts.append(self.plural)
        if name is not None:
            parts.append(name)
        return "/".join(parts)


# The kinds the tests read, under the names they give kubectl (singular; a plural is accepted;
# `plural.group`, a kind of a test's own CRDs, is found through the API's discovery).
RESOURCES: dict[str, Resource] = {
    "topic": Resource(API_VERSION, "topics"),
    "table": Resource(API_VERSION, "tables"),
    "app": Resource(API_VERSION, "apps"),
    "pod": Resource("v1", "pods"),
    "event": Resource("v1", "events"),
    "secret": Resource("v1", "secrets"),
    "configmap": Resource("v1", "configmaps"),
    "service": Resource("v1", "services"),
    "serviceaccount": Resource("v1", "serviceaccounts"),
    "pvc": Resource("v1", "persistentvolumeclaims"),
    "persistentvolumeclaim": Resource("v1", "persistentvolumeclaims"),
    "namespace": Resource("v1", "namespaces", namespaced=False),
    "node": Resource("v1", "nodes", namespaced=False),
    "deployment": Resource("apps/v1", "deployments"),
    "statefulset": Resource("apps/v1", "statefulsets"),
    "role": Resource("rbac.authorization.k8s.io/v1", "roles"),
    "rolebinding": Resource("rbac.authorization.k8s.io/v1", "rolebindings"),
    "networkpolicy": Resource("networking.k8s.io/v1", "networkpolicies"),
    "lease": Resource("coordination.k8s.io/v1", "leases"),
    "crd": Resource("apiextensions.k8s.io/v1", "customresourcedefinitions", namespaced=False),
}


def _transient(error: BaseException) -> bool:
    """An error a user would simply retry: the apiserver busy or restarting."""
    if isinstance(error, ApiException):
        return error.status in (0, 429, 500, 502, 503, 504)
    return isinstance(error, urllib3.exceptions.HTTPError)


class KubeApi:
    """Requests to the stack's apiserver over one kept-alive connection pool (thread-safe)."""

    def __init__(self, kubeconfig: Path) -> None:
        load = kubernetes.config.new_client_from_config
        self._client = load(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]

    def _call(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]] | None = None,
        body: dict[str, Any] | Sequence[dict[str, Any]] | None = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        def attempt() -> dict[str, Any]:
            found = rest.call(
                self._client,
                method,
                path,
                timeout=60,
                query=query,
                body=body,
                content_type=content_type,
            )
            return found or {}

        retrying = Retrying(
            stop=stop_after_delay(30),
            wait=wait_exponential(multiplier=0.25, max=4),
            retry=retry_if_exception(_transient),
            reraise=True,
        )
        return retrying(attempt)

    def resource(self, kind: str) -> Resource:
        """The resource a kind names: `topic`, `topics` or `topics.<group>`."""
        known = RESOURCES.get(kind) or RESOURCES.get(kind.removesuffix("s"))
        if known is not None:
            return known
        plural, dot, group = kind.partition(".")
        if not dot:
            raise KeyError(f"tests/integration/kubeapi.py knows no kind {kind!r}: add it")
        group_version = self._call("GET", f"/apis/{group}")["preferredVersion"]["groupVersion"]
        return self._discovered(group_version, lambda served: served["name"] == plural)

    def resource_of(self, api_version: str, kind: str) -> Resource:
        """The resource of a manifest's apiVersion and kind."""
        known = RESOURCES.get(kind.lower())
        if known is not None and known.group_version == api_version:
            return known
        return self._discovered(
            api_version, lambda served: served["kind"] == kind and "/" not in served["name"]
        )

    def _discovered(
        self, group_version: str, matches: Callable[[dict[str, Any]], bool]
    ) -> Resource:
        """The resource `group_version` serves that `matches`, from the API's discovery."""
        served = self._call("GET", group_path(group_version))
        found = next((r for r in served["resources"] if matches(r)), None)
        if found is None:
            raise KeyError(f"{group_version} serves no such resource")
        return Resource(group_version, found["name"], namespaced=found["namespaced"])

    def read(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or None when the API has none of that name."""
        try:
            return self._call("GET", self.resource(kind).path(namespace, name))
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        *,
        labels: str | None = None,
        fields: str | None = None,
    ) -> list[dict[str, Any]]:
        """The objects of a kind in `namespace` (every namespace when None), by selectors."""
        query = [("labelSelector", labels)] if labels else []
        query += [("fieldSelector", fields)] if fields else []
        found = self._call("GET", self.resource(kind).path(namespace), query)
        return list(found["items"])

    def create_namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        metadata = {"name": name, "labels": labels or {}}
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}
        self._call("POST", self.resource("namespace").path(None), body=body)

    def delete(self, kind: str, name: str | None = None, namespace: str | None = None) -> None:
        """Delete the object, or every object of the kind in `namespace` when `name` is None
        (one request, where `kubectl delete --all` sends one per object); nothing to delete
        (404) is fine, and the call does not wait for finalizers."""
        try:
            self._call("DELETE", self.resource(kind).path(namespace, name))
        except ApiException as error:
            if error.status != 404:
                raise

    def json_patch(
        self, kind: str, name: str, namespace: str, operations: Sequence[dict[str, Any]]
    ) -> dict[str, Any]:
        """The object after a JSON patch (RFC 6902) of it, sent as is (no read first, unlike
        `kubectl patch`); ApiException for a refusal."""
        return self._call(
            "PATCH",
            self.resource(kind).path(namespace, name),
            body=[dict(operation) for operation in operations],
            content_type="application/json-patch+json",
        )

    def apply(self, manifest: dict[str, Any], *, field_manager: str) -> None:
        """Server-side apply of one manifest, as `kubectl apply --server-side` sends it: strict
        field validation, and a conflict with another manager's field refused, not forced."""
        meta = manifest["metadata"]
        found = self.resource_of(manifest["apiVersion"], manifest["kind"])
        self._call(
            "PATCH",
            found.path(meta.get("namespace"), meta["name"]),
            query=[("fieldManager", field_manager), ("fieldValidation", "Strict")],
            body=manifest,
            content_type="application/apply-patch+yaml",  # JSON is YAML
        )


@dataclass(frozen=True)
class Kube:
    """The stack's Kubernetes API: the stack's kubectl (transient errors retried) for what a test
    checks kubectl for, in-process (`api`, KubeApi) for what the tests do many times."""

    kubeconfig: Path
    api: KubeApi = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "api", KubeApi(self.kubeconfig))

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        result = tools.run_kubectl(self.kubeconfig, args, input=input, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result

    def names(self, kind: str) -> list[str]:
        return [item["metadata"]["name"] for item in self.api.list(kind)]
