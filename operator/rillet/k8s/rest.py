"""One request through the official Kubernetes client, its JSON read as plain data.

The client's plain REST call, not its typed API classes: building models for a list of pods
costs more CPU than the request, and a path reaches any kind (a CRD's too) alike. Used by the
App reconcile (`applying.AppKube`) and by the integration tests' in-process requests.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException


def call(
    api: client.ApiClient,
    method: str,
    path: str,
    *,
    timeout: float,
    query: list[tuple[str, str]] | None = None,
    body: Any = None,
    content_type: str = "application/json",
) -> Any:
    """The response's JSON (None for an empty body); ApiException for a status outside 2xx."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    request = api.param_serialize(
        method=method,
        resource_path=path,
        query_params=query or [],
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(*request, _request_timeout=timeout)
    response.read()  # type: ignore[no-untyped-call]
    text = response.data.decode("utf-8") if response.data else ""
    if not 200 <= response.status <= 299:
        ApiException.from_response(http_resp=response, body=text, data=None)
    return json.loads(text) if text else None
