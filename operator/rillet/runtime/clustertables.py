"""Finding a Table through the cluster, as kubectl finds objects, for `rillet table get`.

Credentials and the default namespace come from where kubectl takes them: the in-cluster
ServiceAccount, else the kubeconfig (KUBECONFIG or ~/.kube/config) and its current context's
namespace, else `default`. With neither, there is no cluster to ask (`None`), and the caller
reads TABLE as a topic name, as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from rillet.api.v1alpha1 import kinds, objects, tables

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
REQUEST_TIMEOUT_SECONDS = 10.0


class ClusterError(LookupError):
    """The cluster was asked and could not answer, or has no such Table."""


def find_table(name: str, namespace: str | None) -> tables.Table | None:
    """The Table `name` in `namespace` (default: the context's), or None with no cluster."""
    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
        default_namespace = SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip()
    except config.ConfigException:
        try:
            config.load_kube_config()  # type: ignore[no-untyped-call]
        except (config.ConfigException, FileNotFoundError):
            return None
        _, context = config.list_kube_config_contexts()  # type: ignore[no-untyped-call]
        default_namespace = (context or {}).get("context", {}).get("namespace") or "default"
    namespace = namespace or default_namespace
    group, version = objects.API_VERSION.split("/")
    try:
        found = client.CustomObjectsApi().get_namespaced_custom_object(
            group,
            version,
            namespace,
            "tables",
            name,
            _request_timeout=REQUEST_TIMEOUT_SECONDS,
        )
    except ApiException as error:
        if error.status == 404:
            raise ClusterError(
                f"no Table {name} in namespace {namespace} (kubectl get tables -n {namespace}); "
                f"give -n for another namespace, or --topic to read a Kafka topic by name"
            ) from None
        raise ClusterError(
            f"the cluster refused to read Table {namespace}/{name}: {error.status} {error.reason}"
        ) from None
    except HTTPError as error:
        raise ClusterError(
            f"cannot reach the cluster of the kubeconfig ({type(error).__name__}); give --file "
            f"or --topic to read the Table without it"
        ) from None
    table = kinds.parse(cast("dict[str, Any]", found))
    assert isinstance(table, tables.Table)  # asked for a Table by its plural
    return table
