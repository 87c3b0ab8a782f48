"""Which kubectl failures the stack's kubectl wrapper retries: those a user would run again."""

from __future__ import annotations

import subprocess

import pytest

from rillet_devstack import tools


def _failed(stderr: str) -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(["kubectl"], 1, stdout="", stderr=stderr)


@pytest.mark.parametrize(
    "stderr",
    [
        "The connection to the server 127.0.0.1:6443 was refused - did you specify the right "
        "host or port?\nUnable to connect to the server: dial tcp 127.0.0.1:6443: connect: "
        "connection refused",
        "Unable to connect to the server: net/http: TLS handshake timeout",
        "Error from server (ServiceUnavailable): the server is currently unable to handle the "
        "request",
        "Error from server: etcdserver: request timed out",
        "Error from server (Timeout): the server was unable to return a response in the time "
        "allotted, but may still be processing the request",
        "error: read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer",
    ],
)
def test_requests_the_apiserver_did_not_handle_are_retried(stderr: str) -> None:
    assert tools.is_transient(_failed(stderr))


@pytest.mark.parametrize(
    "stderr",
    [
        'Error from server (NotFound): topics.rillet.io "orders" not found',
        'Error from server (AlreadyExists): namespaces "t-1" already exists',
        'The Topic "x" is invalid: spec.partitions: Invalid value: 0: should be at least 1',
        'Error from server (Forbidden): secrets is forbidden: User "x" cannot list resource',
        "error: timed out waiting for the condition on topics/orders",
    ],
)
def test_answers_of_the_apiserver_are_not(stderr: str) -> None:
    assert not tools.is_transient(_failed(stderr))


def test_a_success_is_never_retried() -> None:
    ok = subprocess.CompletedProcess(["kubectl"], 0, stdout="", stderr="connection refused")
    assert not tools.is_transient(ok)
