"""The driver's identity: a ServiceAccount, and a RoleBinding of the chart's driver ClusterRole.

Spark's Kubernetes backend, running in the driver (client mode), creates and deletes the
executor pods, an executor ConfigMap, and may create Services and PersistentVolumeClaims for
them; the runtime reads, watches and patches its own pod (the desired executor count arrives
there as an annotation, `driverapi.desires`, and its progress leaves there). That is the same
for every App, so one ClusterRole, installed by the chart (templates/driverrole.yaml, named by
RILLET_APP_DRIVER_CLUSTER_ROLE), holds it, and each App's RoleBinding grants it in the App's
namespace alone: no Secrets, nothing cluster-wide, no right on any App. The operator makes no
Role: it may only bind that ClusterRole (`bind` with its name in resourceNames).

An App made by an older release has a Role `<app>-driver` (which also let its driver read its
App) and a RoleBinding `<app>-driver` to it; a binding's roleRef cannot change, so the new one
has a name of its own and the operator deletes the old two (`legacy_paths`).
"""

from __future__ import annotations

from typing import Any, Final

from rillet.reconcile import naming
from rillet.reconcile.appobjects import contexts, metadata

RBAC_API_VERSION: Final = "rbac.authorization.k8s.io/v1"

_MANAGE = ["get", "list", "watch", "create", "delete", "deletecollection"]
# Executor pods are also patched (Spark labels and annotates them), and the driver's own pod
# (its progress annotation).
_MANAGE_PODS = [*_MANAGE, "patch"]


def driver_rules() -> list[dict[str, Any]]:
    """What every driver may do in its App's namespace: the chart's driver ClusterRole holds
    exactly these (a unit test compares it with the template)."""
    return [
        {"apiGroups": [""], "resources": ["pods"], "verbs": _MANAGE_PODS},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {
            "apiGroups": [""],
            "resources": ["services", "configmaps", "persistentvolumeclaims"],
            "verbs": list(_MANAGE),
        },
    ]


def build_service_account(context: contexts.AppContext) -> dict[str, Any]:
    """The ServiceAccount `<app>-driver` the driver pod runs as."""
    name = naming.app_driver_name(context.name)
    return metadata.header(context, api_version="v1", kind="ServiceAccount", name=name)


def build_role_binding(context: contexts.AppContext) -> dict[str, Any]:
    """The RoleBinding `<app>-driver-rights` of the driver ClusterRole to the ServiceAccount."""
    name = naming.app_driver_binding_name(context.name)
    binding = metadata.header(context, api_version=RBAC_API_VERSION, kind="RoleBinding", name=name)
    return {
        **binding,
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": context.env.driver_cluster_role,
        },
        "subjects": [
            {
                "kind": "ServiceAccount",
                "name": naming.app_driver_name(context.name),
                "namespace": context.namespace,
            }
        ],
    }


def legacy_objects(context: contexts.AppContext) -> tuple[dict[str, Any], ...]:
    """What an older release made for the driver and this one does not, as the operator made
    it (without rules or roleRef): its RoleBinding `<app>-driver` and Role `<app>-driver`,
    deleted when the App owns them."""
    name = naming.app_driver_name(context.name)
    return tuple(
        metadata.header(context, api_version=RBAC_API_VERSION, kind=kind, name=name)
        for kind in ("RoleBinding", "Role")
    )
