"""Who may look a Table up: Kubernetes RBAC, asked with the caller's own token.

A lookup carries a bearer token: in `Authorization` when it comes straight to the server (a pod
of the cluster, a port-forward), in `Rillet-Authorization` when it comes through the apiserver's
service proxy, which deletes `Authorization` once it has authenticated the caller (decision
021). The server posts a SelfSubjectAccessReview to the apiserver *with that token*: the
apiserver authenticates it (401: no valid token) and says whether its identity may `get` this
Table (group rillet.io, resource tables, the Table's namespace and name). So the server holds no
credential of its own and needs no RBAC: every authenticated identity may review itself.

Decisions are cached for a few seconds (`DecisionCache`), keyed by a SHA-256 of the token: a
client's every lookup is not an apiserver request, and no token is kept or logged. Revoking a
RoleBinding therefore takes effect within the cache's `ttl`.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import ssl
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from rillet.api.v1alpha1 import objects

PROXIED_HEADER = "Rillet-Authorization"
DEFAULT_TTL_SECONDS = 10.0
DEFAULT_MAX_ENTRIES = 10_000
# Reviews in flight at once: a flood of made-up tokens queues here, not on the apiserver.
MAX_CONCURRENT_REVIEWS = 16
REVIEW_TIMEOUT_SECONDS = 5.0
_REVIEWS_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


@dataclass(frozen=True)
class Decision:
    """An answer to "may this token's identity get the Table": HTTP 200, 401 or 403, and why."""

    status: int
    reason: str

    @property
    def allowed(self) -> bool:
        return self.status == 200


class ReviewUnavailableError(Exception):
    """The apiserver could not be asked (unreachable, timed out, answered an error)."""


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """The caller's bearer token: `Authorization`, else `Rillet-Authorization` (proxied)."""
    for name in ("Authorization", PROXIED_HEADER):
        scheme, _, token = (headers.get(name) or "").strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return None


def token_digest(token: str) -> str:
    """What the cache keys a decision by: the token itself is never kept."""
    return hashlib.sha256(token.encode()).hexdigest()


class DecisionCache:
    """Decisions by token digest, each kept `ttl` seconds; at most `max_entries`, the oldest
    dropped first, so made-up tokens cannot grow it without bound."""

    def __init__(
        self,
        *,
        ttl: float = DEFAULT_TTL_SECONDS,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl, self.max_entries, self._clock = ttl, max_entries, clock
        self._entries: OrderedDict[str, tuple[float, Decision]] = OrderedDict()

    def get(self, digest: str) -> Decision | None:
        found = self._entries.get(digest)
        if found is None:
            return None
        expires, decision = found
        if self._clock() >= expires:
            del self._entries[digest]
            return None
        return decision

    def put(self, digest: str, decision: Decision) -> None:
        self._entries.pop(digest, None)
        self._entries[digest] = (self._clock() + self.ttl, decision)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


def decision_of(status: int, review: Mapping[str, Any] | None, *, table: str) -> Decision:
    """The decision an apiserver's answer to a SelfSubjectAccessReview means; raises
    ReviewUnavailableError for an answer that says nothing about the caller."""
    if status == 401:
        return Decision(
            401, "the cluster did not accept the bearer token (expired, revoked or not its own)"
        )
    if status == 403:  # the identity may not even review itself (system:basic-user removed)
        return Decision(403, f"the token's identity may not review its access to {table}")
    if status not in (200, 201) or review is None:
        raise ReviewUnavailableError(f"the apiserver answered {status} to an access review")
    answer = review.get("status") or {}
    if answer.get("allowed") is True:
        return Decision(200, "allowed")
    why = f" ({answer['reason']})" if answer.get("reason") else ""
    return Decision(
        403, f"the token's identity may not get {table} (RBAC: verb get on tables.rillet.io){why}"
    )


class Authorizer(Protocol):
    """Decides whether a lookup's caller may read the Table."""

    async def decide(self, token: str | None) -> Decision: ...

    async def close(self) -> None: ...


class AllowAll:
    """No authorization (`rillet table serve --authorization=none`, a server outside a
    cluster): the operator never runs a server so."""

    async def decide(self, token: str | None) -> Decision:
        return Decision(200, "authorization is off")

    async def close(self) -> None:
        return None


@dataclass(frozen=True)
class Apiserver:
    """Where the reviews go, and the CA that signs the apiserver's certificate."""

    url: str
    ca_file: str | None

    @classmethod
    def in_cluster(cls, ca_file: str) -> Apiserver:
        """The apiserver a pod reaches (the kubelet gives every pod these two variables)."""
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
        host = f"[{host}]" if ":" in host else host
        return cls(url=f"https://{host}:{port}", ca_file=ca_file)


class RbacAuthorizer:
    """Reviews the caller's token against the Table `namespace/table`, with a cache."""

    def __init__(
        self, *, apiserver: Apiserver, namespace: str, table: str, cache: DecisionCache
    ) -> None:
        self.apiserver, self.namespace, self.table, self.cache = apiserver, namespace, table, cache
        self._session: aiohttp.ClientSession | None = None
        self._pending: dict[str, asyncio.Future[Decision]] = {}
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_REVIEWS)

    @property
    def reference(self) -> str:
        return f"Table {self.namespace}/{self.table}"

    async def decide(self, token: str | None) -> Decision:
        if token is None:
            return Decision(
                401,
                f"no bearer token: send a Kubernetes token whose identity may get "
                f"{self.reference}, in Authorization (or {PROXIED_HEADER} through the "
                f"apiserver's proxy)",
            )
        digest = token_digest(token)
        cached = self.cache.get(digest)
        if cached is not None:
            return cached
        # One review per token at a time: a client's burst of lookups waits for the first.
        pending = self._pending.get(digest)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._pending[digest] = future
        try:
            decision = await self._review(token)
            self.cache.put(digest, decision)
            future.set_result(decision)
            return decision
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # retrieved: waiters re-raise it, no "never retrieved" warning
            raise
        finally:
            del self._pending[digest]

    async def _review(self, token: str) -> Decision:
        group, _ = objects.API_VERSION.split("/")
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "namespace": self.namespace,
                    "verb": "get",
                    "group": group,
                    "resource": "tables",
                    "name": self.table,
                }
            },
        }
        headers = {"Authorization": f"Bearer {token}"}
        async with self._slots:
            try:
                async with self._client().post(
                    f"{self.apiserver.url}{_REVIEWS_PATH}", json=review, headers=headers
                ) as response:
                    body = await response.json() if response.status in (200, 201) else None
                    return decision_of(response.status, body, table=self.reference)
            except (aiohttp.ClientError, TimeoutError, ValueError) as error:
                raise ReviewUnavailableError(
                    f"the apiserver did not answer an access review ({type(error).__name__})"
                ) from None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            context = ssl.create_default_context(cafile=self.apiserver.ca_file)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=context),
                timeout=aiohttp.ClientTimeout(total=REVIEW_TIMEOUT_SECONDS),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
