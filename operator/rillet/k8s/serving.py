"""Waiting until the apiserver serves Rillet's kinds, before the operator starts on them.

kopf scans the served resources when it starts and rescans a group on each CRD event. An
operator started before its CRDs (GitOps tools apply CRDs and the Deployment together) can miss
them: the CRD's last event can come before discovery lists the new group, and kopf then serves
nothing until it restarts. So the CLI waits here first, and kopf starts with every kind served.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from rillet.k8s import login

log = logging.getLogger(__name__)
POLL_SECONDS = 2.0


def missing_kinds(group: str, version: str, plurals: Collection[str]) -> list[str]:
    """The plurals of `group/version` that the apiserver does not serve (yet)."""
    try:
        served = client.CustomObjectsApi().get_api_resources(group, version, _request_timeout=10)
    except ApiException as error:
        if error.status == 404:  # the group is not served at all
            return sorted(plurals)
        raise
    names = {resource.name for resource in served.resources}
    return sorted(set(plurals) - names)


def wait_until_served(group: str, version: str, plurals: Collection[str]) -> None:
    """Block until every plural is served; say once what is missing and how to fix it."""
    login.load_config()
    said: list[str] = []
    while missing := missing_kinds(group, version, plurals):
        if missing != said:
            said = missing
            log.warning(
                "waiting for the CRDs of %s (not served: %s); apply them with "
                "`kubectl apply --server-side -f crds/`",
                group,
                ", ".join(missing),
            )
        time.sleep(POLL_SECONDS)
    if said:
        log.info("CRDs of %s served", group)
