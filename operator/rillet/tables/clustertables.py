"""Finding a Table through the cluster, as kubectl finds objects, for `rillet table get`.

Credentials and the default namespace come from where kubectl takes them: the in-cluster
ServiceAccount, else the kubeconfig (KUBECONFIG or ~/.kube/config) and its current context's
namespace, else `default`. With neither, there is no cluster to ask (`None`), and the caller
reads TABLE as a topic name, as before.

The topic is the one the operator reports (`status.topicName`: with namespace prefixing on it
is `<namespace>.<name>`), else the spec's. Only the fields needed are read, so a Table written
by a newer release of the CRD is still found.

A Table with a server (`status.server`) is asked through the apiserver's proxy to its Service,
so a lookup from outside the cluster needs nothing but the kubeconfig: the right to get
services/proxy in the namespace, and to get the Table. The proxy deletes the caller's
`Authorization` header once it has authenticated it, so the caller's bearer token (a static or
OIDC token, an exec plugin's, a ServiceAccount's) also travels as `Rillet-Authorization`, which
the server reviews with the apiserver (decision 021). A client certificate cannot be forwarded:
such a caller gets the server's 401, and `rillet table get` says so.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, cast, get_args
from urllib.parse import quote

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from rillet.api.v1alpha1 import fields, objects

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
REQUEST_TIMEOUT_SECONDS = 10.0


class ClusterError(LookupError):
    """The cluster was asked and could not answer, or has no such Table."""


@dataclasses.dataclass(frozen=True)
class ServerRoute:
    """How to reach a Table's server: its Service, through the apiserver's proxy."""

    configuration: client.Configuration
    namespace: str
    service: str
    table: str


@dataclasses.dataclass(frozen=True)
class ServerAnswer:
    """A Table server's HTTP answer to a lookup."""

    status: int
    body: bytes
    partial: bool


@dataclasses.dataclass(frozen=True)
class ClusterTable:
    """What reading a Table takes: its Kafka topic and the formats of its keys and values, and
    its server if it has one."""

    topic: str
    key_format: fields.Format
    value_format: fields.Format = "json"
    server: ServerRoute | None = None


def find_table(name: str, namespace: str | None) -> ClusterTable | None:
    """The Table `name` in `namespace` (default: the context's), or None with no cluster."""
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        default_namespace = SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip()
    except config.ConfigException:
        try:
            config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except (config.ConfigException, FileNotFoundError):
            return None
        except Exception as error:  # an exec plugin that fails, a kubeconfig that does not parse
            raise ClusterError(f"cannot load the kubeconfig: {error}") from None
        _, context = config.list_kube_config_contexts()  # type: ignore[no-untyped-call]
        default_namespace = (context or {}).get("context", {}).get("namespace") or "default"
    configuration.retries = 0  # one try: a stale context should fail in seconds, not minutes
    namespace = namespace or default_namespace
    group, version = objects.API_VERSION.split("/")
    api = client.CustomObjectsApi(client.ApiClient(configuration))
    try:
        found = api.get_namespaced_custom_object(
            group, version, namespace, "tables", name, _request_timeout=REQUEST_TIMEOUT_SECONDS
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
    body = cast("dict[str, Any]", found)
    table = _read(body, name)
    service = ((body.get("status") or {}).get("server") or {}).get("service")
    if service:
        route = ServerRoute(configuration, namespace, str(service), name)
        table = dataclasses.replace(table, server=route)
    return table


PROXIED_AUTHORIZATION = "Rillet-Authorization"  # tables.serving.authorizing reads it
NO_TOKEN_HINT = (
    "the kubeconfig's credentials hold no bearer token (a client certificate cannot be "
    "forwarded to the Table's server): use a token, e.g. of a ServiceAccount allowed to get the "
    "Table (kubectl create token), or give -b to read the topic"
)


def bearer_authorization(configuration: client.Configuration) -> str | None:
    """`Bearer <token>` of the caller's credentials, None when they are no token."""
    # Refreshed when it expires (an exec plugin's, a projected ServiceAccount token).
    value = configuration.get_api_key_with_prefix("BearerToken", alias="authorization")
    return str(value) if value and str(value).lower().startswith("bearer ") else None


def caller_authorization() -> str | None:
    """The bearer authorization of the credentials kubectl would use, None without any."""
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except config.ConfigException:
        try:
            config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except Exception:  # no kubeconfig, or one that does not load: send no token
            return None
    return bearer_authorization(configuration)


def ask_server(route: ServerRoute, key: str) -> ServerAnswer:
    """GET /tables/<table>/<key> of the Table's server through the apiserver's service proxy.

    The proxy's own refusals come back as answers too: 503 while the Service has no Ready
    endpoint (every replica still loading), 403 without the right to proxy."""
    api = client.ApiClient(route.configuration)
    path = (
        f"/api/v1/namespaces/{quote(route.namespace)}/services/{quote(route.service)}:http"
        f"/proxy/tables/{quote(route.table)}/{quote(key, safe='')}"
    )
    headers = {"Accept": "*/*"}
    if (authorization := bearer_authorization(route.configuration)) is not None:
        headers[PROXIED_AUTHORIZATION] = authorization  # the proxy drops Authorization
    request = api.param_serialize(
        method="GET", resource_path=path, header_params=headers, auth_settings=["BearerToken"]
    )
    try:
        response = api.call_api(*request, _request_timeout=REQUEST_TIMEOUT_SECONDS)
        response.read()  # type: ignore[no-untyped-call]
    except HTTPError as error:
        raise ClusterError(f"cannot reach the cluster ({type(error).__name__})") from None
    return ServerAnswer(
        status=response.status,
        body=response.data or b"",
        partial=response.getheader("Rillet-Match") == "partial",  # type: ignore[no-untyped-call]
    )


def _read(table: dict[str, Any], name: str) -> ClusterTable:
    spec, status = table.get("spec") or {}, table.get("status") or {}
    return ClusterTable(
        topic=status.get("topicName") or spec.get("topicName") or name,
        key_format=_format(spec, "keyFormat", "string", name, get_args(fields.TableFormat)),
        value_format=_format(spec, "valueFormat", "json", name, get_args(fields.TableValueFormat)),
    )


def _format(
    spec: dict[str, Any], field: str, default: str, name: str, known: tuple[str, ...]
) -> fields.Format:
    value = spec.get(field) or default
    if value not in known:
        raise ClusterError(f"Table {name} has {field} {value!r}, which this CLI cannot read")
    return cast("fields.Format", value)
