"""What a Table server checks before it answers: the caller's authorization and the key.

Test plan:
- the bearer token is read from Authorization, else from Rillet-Authorization (what comes
  through the apiserver's proxy, which drops Authorization); anything but a bearer token is none;
- the apiserver's answer to the caller's SelfSubjectAccessReview decides: allowed is 200, not
  allowed 403 saying what RBAC it takes, an unauthenticated token 401; an answer that says
  nothing about the caller is no decision (the server answers 503, caches nothing);
- decisions are cached by a digest of the token, never the token, for `ttl` seconds, at most
  `max_entries` of them (the oldest dropped first);
- the authorizer asks the apiserver once per token while its decision is cached, once for a
  burst of concurrent lookups with one token, and never without a token (401);
- `{}` matches every key of a JSON Table and is refused with a message saying what to give; a
  partial key or another format's key is not;
- a partial key's scan stops at its limit, and past its deadline with ScanTimeoutError.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from rillet.tables import tables
from rillet.tables.serving import authorizing
from rillet.tables.tablestore import ScanTimeoutError, TableStore

TOKEN = "eyJhbGciOiJSUzI1NiJ9.secret-part"


def test_the_token_comes_from_authorization_else_from_the_proxied_header() -> None:
    assert authorizing.bearer_token({"Authorization": f"Bearer {TOKEN}"}) == TOKEN
    assert authorizing.bearer_token({"Rillet-Authorization": f"bearer {TOKEN}"}) == TOKEN
    assert authorizing.bearer_token({"Authorization": "Basic dXNlcjpwdw=="}) is None
    assert authorizing.bearer_token({"Authorization": "Bearer "}) is None
    assert authorizing.bearer_token({}) is None


def test_the_apiservers_review_decides() -> None:
    table = "Table shop/counts"
    allowed = authorizing.decision_of(201, {"status": {"allowed": True}}, table=table)
    assert (allowed.status, allowed.allowed) == (200, True)
    denied = authorizing.decision_of(
        201, {"status": {"allowed": False, "reason": "no RBAC rule"}}, table=table
    )
    assert denied.status == 403
    assert "get Table shop/counts" in denied.reason
    assert "tables.rillet.io" in denied.reason
    assert "no RBAC rule" in denied.reason
    assert authorizing.decision_of(401, None, table=table).status == 401
    assert authorizing.decision_of(403, None, table=table).status == 403
    with pytest.raises(authorizing.ReviewUnavailableError):
        authorizing.decision_of(500, None, table=table)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_decisions_are_cached_by_a_digest_of_the_token_for_ttl_seconds() -> None:
    clock = _Clock()
    cache = authorizing.DecisionCache(ttl=10, clock=clock)
    digest = authorizing.token_digest(TOKEN)
    assert TOKEN not in digest
    cache.put(digest, authorizing.Decision(403, "no"))

    clock.now = 9.9
    assert cache.get(digest) == authorizing.Decision(403, "no")
    assert cache.get(authorizing.token_digest("another")) is None
    clock.now = 10.0
    assert cache.get(digest) is None
    assert len(cache) == 0


def test_the_cache_keeps_at_most_max_entries_dropping_the_oldest() -> None:
    cache = authorizing.DecisionCache(ttl=10, max_entries=2, clock=_Clock())
    for name in ("a", "b", "c"):
        cache.put(name, authorizing.Decision(200, name))
    assert len(cache) == 2
    assert cache.get("a") is None
    assert cache.get("c") == authorizing.Decision(200, "c")


class _CountingAuthorizer(authorizing.RbacAuthorizer):
    """The authorizer with the apiserver's answer made up: what is tested is when it asks."""

    def __init__(self, answer: authorizing.Decision) -> None:
        apiserver = authorizing.Apiserver(url="https://apiserver.invalid", ca_file=None)
        super().__init__(
            apiserver=apiserver,
            namespace="shop",
            table="counts",
            cache=authorizing.DecisionCache(ttl=10),
        )
        self.answer, self.reviews = answer, 0

    async def _review(self, token: str) -> authorizing.Decision:
        self.reviews += 1
        await asyncio.sleep(0.01)  # a round trip, during which more lookups arrive
        return self.answer


def test_one_review_per_token_while_its_decision_is_cached() -> None:
    async def scenario() -> None:
        authorizer = _CountingAuthorizer(authorizing.Decision(200, "allowed"))
        burst = await asyncio.gather(*(authorizer.decide(TOKEN) for _ in range(20)))
        assert all(decision.allowed for decision in burst)
        assert (await authorizer.decide(TOKEN)).allowed
        assert authorizer.reviews == 1
        await authorizer.decide("another token")
        assert authorizer.reviews == 2

        missing = await authorizer.decide(None)
        assert missing.status == 401
        assert "Rillet-Authorization" in missing.reason
        assert authorizer.reviews == 2

    asyncio.run(scenario())


def test_a_match_all_key_is_refused_saying_what_to_give() -> None:
    problem = tables.match_all_problem(" { } ", "json")
    assert problem is not None
    assert "matches every key" in problem
    assert "at least one field" in problem
    assert tables.match_all_problem('{"user": "u1"}', "json") is None
    assert tables.match_all_problem("{}", "string") is None  # a string key is matched exactly


def _store(path: Path, keys: int) -> TableStore:
    store = TableStore(path / "table.sqlite", "json")
    store.apply(
        tables.Entry(
            key=json.dumps({"page": "/home", "n": n}).encode(),
            value=b"1",
            partition=0,
            offset=n,
            timestamp=0,
        )
        for n in range(keys)
    )
    return store


def test_a_partial_keys_scan_stops_at_its_limit_and_its_deadline(tmp_path: Path) -> None:
    store = _store(tmp_path, 500)
    try:
        assert len(store.lookup('{"page": "/home"}')) == 500
        assert len(store.lookup('{"page": "/home"}', limit=10)) == 10
        with pytest.raises(ScanTimeoutError):
            store.lookup('{"page": "/home"}', deadline=time.monotonic() - 1)
        # A deadline left unmet leaves the connection as it was for the next read.
        assert store.lookup('{"page": "/home", "n": 7}') == [(b'{"page": "/home", "n": 7}', b"1")]
    finally:
        store.close()
