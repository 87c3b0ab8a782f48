"""Pure: which SCRAM users the principal sweep removes (their App is gone).

An App's user is removed by its delete handler; when Kafka was unreachable then, the user
stays. The operator's periodic sweep lists every SCRAM user and removes those that are
provably this operator's and orphaned: made for this cluster (`kafkaaccess.owner_of`: the
`rillet.<cluster>.` prefix), of a namespace this operator watches, and of no App that exists.
Another cluster's users, users of namespaces another operator watches, and users Rillet never
named (a person's, a legacy `rillet.<ns>.<app>`) are never touched.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Collection, Iterable

from rillet.reconcile import kafkaaccess


def _matches(namespace: str, pattern: str) -> bool:
    """kopf's matching of one namespace pattern: comma-separated globs, `!` excludes, a first
    exclusion implies a leading `*`, a later inclusion re-admits only what the first admitted."""
    globs = [glob.strip() for glob in pattern.split(",")]
    if not globs or globs[0].startswith("!"):
        globs.insert(0, "*")
    matches = first = fnmatch.fnmatchcase(namespace, globs[0])
    for glob in globs[1:]:
        if glob.startswith("!"):
            matches = matches and not fnmatch.fnmatchcase(namespace, glob[1:])
        else:
            matches = matches or (first and fnmatch.fnmatchcase(namespace, glob))
    return matches


def watched(namespace: str, patterns: Collection[str]) -> bool:
    """Whether the operator watches `namespace` (no patterns: every namespace)."""
    return not patterns or any(_matches(namespace, pattern) for pattern in patterns)


def orphans(
    users: Iterable[str],
    *,
    cluster: str,
    patterns: Collection[str],
    apps: Collection[tuple[str, str]],
) -> tuple[str, ...]:
    """The users to remove, sorted: this cluster's, of a watched namespace, whose App
    (namespace, name) is not in `apps`. List `apps` after `users`: an App's user is made after
    the App, so an App made meanwhile is never missed."""
    found = []
    for user in users:
        owner = kafkaaccess.owner_of(user, cluster=cluster)
        if owner is not None and watched(owner[0], patterns) and owner not in apps:
            found.append(user)
    return tuple(sorted(found))
