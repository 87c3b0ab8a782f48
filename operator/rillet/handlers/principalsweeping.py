"""The principal sweep: SCRAM users of deleted Apps removed once Kafka answers again.

An App's delete handler removes its user, but does not hold the App while Kafka is
unreachable. So, at start-up and every `AppSettings.principal_sweep_seconds`, the operator
lists every SCRAM user, then every App, and removes (each SCRAM mechanism, every ACL) the users
`reconcile.principalsweeps.orphans` names: this cluster's, of a watched namespace, of no App.
A failed pass (Kafka, the apiserver) removes nothing and is logged; the next one tries again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection

from rillet.handlers.appaccess import AppAccess
from rillet.k8s import applying
from rillet.reconcile import principalsweeps

log = logging.getLogger(__name__)


async def sweep(
    access: AppAccess, kube: applying.AppKube, *, patterns: Collection[str], listed: Collection[str]
) -> tuple[str, ...]:
    """One pass; returns the users removed. `patterns`: the watched namespaces (kopf's), `listed`:
    the namespaces whose Apps are listed one by one when the operator's rights are namespaced."""
    # Users first: an App made after this listing has no user in it.
    users = await access.admin.users()
    apps = await kube.app_keys(listed)
    orphans = principalsweeps.orphans(users, cluster=access.cluster, patterns=patterns, apps=apps)
    for user in orphans:
        await access.admin.remove(user)
        log.info("removed SCRAM user %s and its ACLs: no App of that name exists any more", user)
    return orphans


async def sweep_forever(
    access: AppAccess,
    kube: applying.AppKube,
    *,
    interval: float,
    patterns: Collection[str],
    listed: Collection[str],
) -> None:
    """Sweep now and every `interval` seconds, until cancelled."""
    while True:
        try:
            await sweep(access, kube, patterns=patterns, listed=listed)
        except Exception as error:  # Kafka or the apiserver: the next pass tries again
            log.warning(
                "the sweep of deleted Apps' SCRAM users failed (next in %gs): %s",
                interval,
                applying.describe(error),
            )
        await asyncio.sleep(interval)
