"""The driver's identity: a ServiceAccount, a Role and the RoleBinding between them.

Spark's Kubernetes backend, running in the driver, creates and deletes the executor pods, an
executor ConfigMap, and may create Services and PersistentVolumeClaims for them; the driver also
reads and watches its own App (the desired executor count is in its status). The Role grants
exactly that, in the App's namespace: no Secrets, nothing cluster-wide, no other App.
"""

from __future__ import annotations

from typing import Any, Final

from rillet.api.v1alpha1 import objects
from rillet.reconcile import naming
from rillet.reconcile.appobjects import contexts, metadata

RBAC_API_VERSION: Final = "rbac.authorization.k8s.io/v1"

_MANAGE = ["get", "list", "watch", "create", "delete", "deletecollection"]
# Executor pods are also patched (Spark labels and annotates them).
_MANAGE_PODS = [*_MANAGE, "patch"]


def role_rules(app: str) -> list[dict[str, Any]]:
    """The Role's rules: executor pods and their ConfigMap, Services and claims; its own App."""
    return [
        {"apiGroups": [""], "resources": ["pods"], "verbs": _MANAGE_PODS},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {
            "apiGroups": [""],
            "resources": ["services", "configmaps", "persistentvolumeclaims"],
            "verbs": list(_MANAGE),
        },
        {
            # watch: the driver hears of a new executor count at once (a watch of one object,
            # by a metadata.name field selector, is authorized by its resourceNames).
            "apiGroups": [objects.GROUP],
            "resources": ["apps"],
            "resourceNames": [app],
            "verbs": ["get", "watch"],
        },
    ]


def build_service_account(context: contexts.AppContext) -> dict[str, Any]:
    """The ServiceAccount `<app>-driver` the driver pod runs as."""
    name = naming.app_driver_name(context.name)
    return metadata.header(context, api_version="v1", kind="ServiceAccount", name=name)


def build_role(context: contexts.AppContext) -> dict[str, Any]:
    """The Role `<app>-driver`: what Spark's Kubernetes backend and the runtime need."""
    name = naming.app_driver_name(context.name)
    role = metadata.header(context, api_version=RBAC_API_VERSION, kind="Role", name=name)
    return {**role, "rules": role_rules(context.name)}


def build_role_binding(context: contexts.AppContext) -> dict[str, Any]:
    """The RoleBinding of the Role `<app>-driver` to the ServiceAccount of the same name."""
    name = naming.app_driver_name(context.name)
    binding = metadata.header(context, api_version=RBAC_API_VERSION, kind="RoleBinding", name=name)
    return {
        **binding,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": context.namespace}],
    }
