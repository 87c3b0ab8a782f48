"""Applying the Kubernetes objects of Apps and Table servers, and reading App pods.

Objects go in by server-side apply as field manager `rillet-operator`, forced: the operator owns
every field it sets on them, and a hand edit of one of those fields is taken back at the next
reconcile. Forced only over its own objects: one of the name that it did not make is read first
(a Secret without `get`: k8s.ownsecrets) and left alone (`ownership`, ForeignObjectError), and
deletions name the uid they read. Fields the operator does not set (another controller's, a
user's label) are left alone. A StatefulSet field the apiserver will not update (selector,
serviceName, the checkpoint claim template: `drivers.replacement_reasons`) is changed by
deleting the StatefulSet and creating it again; its checkpoint claim outlives it, so the new
driver resumes from it.

Requests use the official client's plain REST call in a worker thread and read the JSON as it
comes (dicts, not the client's models: building models for a list of pods costs more CPU than
the request).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from rillet.api.v1alpha1 import objects as api_objects
from rillet.k8s import login, ownsecrets, rest
from rillet.reconcile import appobjects, naming, ownership
from rillet.reconcile.appobjects import drivers, metadata

FIELD_MANAGER: Final = "rillet-operator"
REQUEST_TIMEOUT_SECONDS: Final = 15.0
# How long a replaced StatefulSet may take to go (it has no finalizers: normally at once).
GONE_SECONDS: Final = 10.0

_PLURALS: Final = {
    "ServiceAccount": "serviceaccounts",
    "ConfigMap": "configmaps",
    "Service": "services",
    "Role": "roles",  # an older release's, deleted (rbac.legacy_objects)
    "RoleBinding": "rolebindings",
    "StatefulSet": "statefulsets",
    "Deployment": "deployments",
    "NetworkPolicy": "networkpolicies",
    "Pod": "pods",
    "Secret": "secrets",
}
# Every pod of every App, driver or executor (all carry these labels).
APP_PODS_SELECTOR: Final = f"app.kubernetes.io/managed-by=rillet,{metadata.ROLE_LABEL}"


def object_path(api_version: str, kind: str, namespace: str, name: str | None = None) -> str:
    """The REST path of a namespaced object (or of its collection, without a name)."""
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    path = f"{prefix}/namespaces/{quote(namespace)}/{_PLURALS[kind]}"
    return f"{path}/{quote(name)}" if name else path


def path_of(obj: Mapping[str, Any]) -> str:
    """The REST path of an object given in full (apiVersion, kind, metadata)."""
    meta = obj["metadata"]
    return object_path(obj["apiVersion"], obj["kind"], meta["namespace"], meta["name"])


def spec_hash_of(stateful_set: Mapping[str, Any] | None) -> str | None:
    """The spec hash on a StatefulSet's pod template (what the driver was started from)."""
    template = ((stateful_set or {}).get("spec") or {}).get("template") or {}
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    return annotations.get(metadata.SPEC_HASH_ANNOTATION)


@dataclass(frozen=True)
class Applied:
    """What applying an App's objects changed about its driver."""

    created: bool = False  # there was no StatefulSet: a new driver
    rolled: bool = False  # the driver's pod template changed: the driver restarts
    replaced: tuple[str, ...] = ()  # immutable StatefulSet fields that made it recreated


class ApplyRefusedError(RuntimeError):
    """The apiserver refused an object (invalid, or forbidden): retrying will not help."""


class ForeignObjectError(ApplyRefusedError):
    """An object of the name the operator would apply exists, and is not the operator's
    (`ownership`): it is left as it is."""


def refusal_message(error: ApiException) -> str:
    """The apiserver's own message of a refusal (its Status), else the HTTP reason."""
    try:
        status = json.loads(error.body or "{}")
    except ValueError:
        status = {}
    message = status.get("message") if isinstance(status, dict) else None
    return str(message or f"HTTP {error.status} {error.reason or ''}".strip())


def app_pods_paths(namespaces: Collection[str], *, namespaced: bool) -> list[str]:
    """Where the pods of the Apps in `namespaces` are listed: one cluster-wide request, or one
    per namespace when the operator's rights are a Role in each watched namespace."""
    if not namespaced:
        return ["/api/v1/pods"]
    return [object_path("v1", "Pod", namespace) for namespace in sorted(namespaces)]


def describe(error: BaseException) -> str:
    """One line for a failed call, for logs: the apiserver's message, never headers."""
    if isinstance(error, ApiException):
        return f"HTTP {error.status}: {refusal_message(error)}"
    return str(error) or type(error).__name__


class AppKube:
    """The Kubernetes calls of the App reconcile and the scaling loop. `namespaced`: the
    operator may list pods only in the namespaces it watches (`app_pods_paths`)."""

    def __init__(self, *, namespaced: bool = False) -> None:
        self._namespaced = namespaced
        login.load_config()
        self._api = client.ApiClient()

    @property
    def apiserver_url(self) -> str:
        """The apiserver as this operator reaches it (in a cluster: the kubernetes Service)."""
        return str(self._api.configuration.host)

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        return rest.call(
            self._api,
            method,
            path,
            timeout=REQUEST_TIMEOUT_SECONDS,
            query=query,
            body=body,
            content_type=content_type,
        )

    def _get(self, path: str, query: list[tuple[str, str]] | None = None) -> Any:
        try:
            return self._call("GET", path, query=query)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def _server_side_apply(self, obj: Mapping[str, Any]) -> None:
        problem = ownership.foreign_problem(self._observe(obj), obj)
        if problem is not None:
            raise ForeignObjectError(problem)
        try:
            self._call(
                "PATCH",
                path_of(obj),
                query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
                body=dict(obj),
                content_type="application/apply-patch+yaml",  # JSON is YAML
            )
        except ApiException as error:
            if error.status in (400, 403, 422):
                meta = obj["metadata"]
                raise ApplyRefusedError(
                    f"the apiserver refused {obj['kind']} {meta['name']}: {refusal_message(error)}"
                ) from None
            raise

    def _replace_stateful_set(self, observed: Mapping[str, Any]) -> None:
        """Delete the StatefulSet (this one, by uid) and wait until it is gone."""
        path, uid = path_of(observed), observed["metadata"]["uid"]
        options = {"propagationPolicy": "Background", "preconditions": {"uid": uid}}
        try:
            self._call("DELETE", path, body=options)
        except ApiException as error:
            if error.status not in (404, 409):  # gone already, or already another one
                raise
        deadline = time.monotonic() + GONE_SECONDS
        while time.monotonic() < deadline:
            current = self._get(path)
            if current is None or current["metadata"]["uid"] != uid:
                return
            time.sleep(0.2)

    def _apply(self, objects: appobjects.AppObjects) -> Applied:
        observed = self._get(path_of(objects.stateful_set))
        # Before anything is applied: a StatefulSet of the name that is someone else's is never
        # replaced (deleted), nor the App's other objects applied beside it.
        problem = ownership.foreign_problem(observed, objects.stateful_set)
        if problem is not None:
            raise ForeignObjectError(problem)
        reasons = (
            tuple(drivers.replacement_reasons(observed, objects.stateful_set)) if observed else ()
        )
        for obj in objects.in_apply_order():
            if obj is objects.stateful_set and observed is not None and reasons:
                self._replace_stateful_set(observed)
            self._server_side_apply(obj)
        # After the new binding: the driver is never without its rights. One not the App's is
        # left as it is.
        for obj in objects.legacy:
            owner = ownership.controller_of(obj)
            if owner is not None:
                self._delete_owned([path_of(obj)], owner)
        return Applied(
            created=observed is None,
            rolled=observed is not None and spec_hash_of(observed) != objects.spec_hash,
            replaced=reasons,
        )

    async def apply(self, objects: appobjects.AppObjects) -> Applied:
        """Apply the App's objects in order; raises ApplyRefusedError for a refused object."""
        return await asyncio.to_thread(self._apply, objects)

    def _apply_all(self, objects: Sequence[Mapping[str, Any]]) -> None:
        for obj in objects:
            self._server_side_apply(obj)

    async def apply_all(self, objects: Sequence[Mapping[str, Any]]) -> None:
        """Apply objects in order; raises ApplyRefusedError for a refused object."""
        await asyncio.to_thread(self._apply_all, objects)

    def _delete_owned(self, paths: Sequence[str], owner: Mapping[str, Any]) -> list[str]:
        left = []
        for path in paths:
            observed = self._get(path)
            if observed is None:
                continue
            if not ownership.is_ours(observed, {"metadata": {"ownerReferences": [owner]}}):
                left.append(f"{observed['kind']} {observed['metadata']['name']}")
                continue
            # This object, by uid: never one of the name made since it was read.
            options = {
                "propagationPolicy": "Background",
                "preconditions": {"uid": observed["metadata"]["uid"]},
            }
            try:
                self._call("DELETE", path, body=options)
            except ApiException as error:
                if error.status not in (404, 409):  # gone, or another object of that name now
                    raise
        return left

    async def delete_owned(self, paths: Sequence[str], owner: Mapping[str, Any]) -> list[str]:
        """Delete the objects at `paths` that `owner` (a controller owner reference) controls;
        one already gone is fine. Returns those left because someone else made them."""
        return await asyncio.to_thread(self._delete_owned, paths, owner)

    def _force_delete_pods(self, namespace: str, pods: Sequence[tuple[str, str]]) -> None:
        for name, uid in pods:
            body = {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
            try:
                self._call("DELETE", object_path("v1", "Pod", namespace, name), body=body)
            except ApiException as error:
                if error.status not in (404, 409):  # gone, or another pod of that name now
                    raise

    async def force_delete_pods(self, namespace: str, pods: Sequence[tuple[str, str]]) -> None:
        """Delete the pods (name, uid) without waiting for their kubelet to confirm."""
        await asyncio.to_thread(self._force_delete_pods, namespace, pods)

    async def read_own_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The operator's Secret of that name (labelled as Rillet's), None if there is none;
        ForeignObjectError if the Secret of that name is not labelled so (k8s.ownsecrets: read
        without `get`)."""
        path = object_path("v1", "Secret", namespace, name)
        found: dict[str, Any] | None = await asyncio.to_thread(
            ownsecrets.read, self._call, path, foreign=ForeignObjectError
        )
        return found

    def _observe(self, obj: Mapping[str, Any]) -> Any:
        """What is under the object's name now: a Secret as the operator's own (or
        ForeignObjectError), any other object as it is."""
        if obj["kind"] == "Secret":
            return ownsecrets.read(self._call, path_of(obj), foreign=ForeignObjectError)
        return self._get(path_of(obj))

    def _create(self, obj: Mapping[str, Any]) -> bool:
        meta = obj["metadata"]
        path = object_path(obj["apiVersion"], obj["kind"], meta["namespace"])
        try:
            self._call("POST", path, query=[("fieldManager", FIELD_MANAGER)], body=dict(obj))
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        return True

    async def create(self, obj: Mapping[str, Any]) -> bool:
        """Create the object; False if one of its name exists already (it is left as it is)."""
        return await asyncio.to_thread(self._create, obj)

    def _create_once(self, obj: Mapping[str, Any]) -> None:
        # One request on every reconcile after the first: the read (a Secret's costs a patch).
        observed = self._observe(obj)
        if observed is None and self._create(obj):
            return
        observed = observed or self._observe(obj)  # made meanwhile: whose is it?
        problem = ownership.foreign_problem(observed, obj)
        if problem is not None:
            raise ForeignObjectError(problem)

    async def create_once(self, obj: Mapping[str, Any]) -> None:
        """Create the object unless it exists: one that does is kept as it is (what it holds
        was made once), or, when the object's owner did not make it, ForeignObjectError."""
        await asyncio.to_thread(self._create_once, obj)

    def _patch(self, path: str, patch: Mapping[str, Any]) -> None:
        self._call("PATCH", path, body=dict(patch), content_type="application/merge-patch+json")

    async def patch_secret(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        """Merge `patch` into the Secret (a rotated password)."""
        path = object_path("v1", "Secret", namespace, name)
        await asyncio.to_thread(self._patch, path, patch)

    async def patch_pod(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        """Merge `patch` into the pod (a driver's desired executor count); one gone is fine."""
        path = object_path("v1", "Pod", namespace, name)
        try:
            await asyncio.to_thread(self._patch, path, patch)
        except ApiException as error:
            if error.status != 404:  # the driver went: its successor is annotated next pass
                raise

    async def namespace_uid(self, name: str) -> str:
        """The uid of a namespace (kube-system's is the usual id of a cluster)."""
        found = await asyncio.to_thread(self._call, "GET", f"/api/v1/namespaces/{quote(name)}")
        return str(found["metadata"]["uid"])

    def _app_keys(self, namespaces: Collection[str]) -> set[tuple[str, str]]:
        prefix = f"/apis/{api_objects.GROUP}/{api_objects.VERSION}"
        if self._namespaced:
            paths = [f"{prefix}/namespaces/{quote(ns)}/apps" for ns in sorted(namespaces)]
        else:
            paths = [f"{prefix}/apps"]
        keys = set()
        for path in paths:
            # Raises when a list fails (never an empty answer): the sweep removes what it
            # does not find.
            listed = self._call("GET", path)
            for item in listed.get("items") or []:
                meta = item["metadata"]
                keys.add((str(meta["namespace"]), str(meta["name"])))
        return keys

    async def app_keys(self, namespaces: Collection[str]) -> set[tuple[str, str]]:
        """(namespace, name) of every App: cluster-wide, or of `namespaces` when namespaced."""
        return await asyncio.to_thread(self._app_keys, namespaces)

    async def driver_pod(self, namespace: str, app: str) -> dict[str, Any] | None:
        """The App's driver pod, None if there is none."""
        path = object_path("v1", "Pod", namespace, naming.app_driver_pod_name(app))
        return await asyncio.to_thread(self._get, path)

    async def executor_pods(self, namespace: str, app: str) -> list[dict[str, Any]]:
        """The App's executor pods."""
        query = [("labelSelector", metadata.label_selector(app, "executor"))]
        found = await asyncio.to_thread(self._get, object_path("v1", "Pod", namespace), query)
        return list((found or {}).get("items") or [])

    async def nodes(self) -> list[dict[str, Any]]:
        """Every Node of the cluster (the operator reads their Ready condition)."""
        found = await asyncio.to_thread(self._get, "/api/v1/nodes")
        return list((found or {}).get("items") or [])

    async def app_pods(self, namespaces: Collection[str]) -> list[dict[str, Any]]:
        """Every driver and executor pod of the Apps in `namespaces` (maybe more)."""
        query = [("labelSelector", APP_PODS_SELECTOR)]
        paths = app_pods_paths(namespaces, namespaced=self._namespaced)
        found = await asyncio.gather(*(asyncio.to_thread(self._get, p, query) for p in paths))
        return [pod for listed in found for pod in (listed or {}).get("items") or []]
