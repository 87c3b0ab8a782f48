"""The stack's object store (`rillet dev up --object-store`) is a real S3 store, reached with what
`rillet dev env` prints and what the Secret rillet-objectstore holds.

Test plan:
- `rillet dev env` names the endpoint (on the node's address when the stack has a node, so
  pods on every node reach it), the bucket and a key; `rillet dev status` shows the store's
  process running and its endpoint.
- an object written with that key by an S3 client of its own (the minio SDK, SigV4) is listed
  back in the bucket with its size, and read back with its bytes.
- an unknown access key is refused (InvalidAccessKeyId), and the right key id with a wrong
  secret too (SignatureDoesNotMatch): the store is not open to anyone.
- the Secret in namespace default holds the same key under AWS_ACCESS_KEY_ID and
  AWS_SECRET_ACCESS_KEY, and a client made from it alone lists the bucket.
- a pod on the node reaches the store at the printed endpoint: it reads an object through a
  presigned URL, is refused it without a signature (403), and gets the key as its env from a
  copy of the Secret made in its own namespace as the README says.
"""

from __future__ import annotations

import base64
import io
import json
import os
import secrets
import subprocess
import sys
from datetime import timedelta

import pytest
import urllib3
from minio import Minio
from minio.error import S3Error

from rillet_devstack import node as devnode
from rillet_devstack import stack as devstack

from . import isolation
from .conftest import Kube
from .polling import wait_for

STORE_VARIABLES = (
    "RILLET_S3_ENDPOINT",
    "RILLET_S3_BUCKET",
    "RILLET_S3_ACCESS_KEY_ID",
    "RILLET_S3_SECRET_ACCESS_KEY",
)


@pytest.fixture(scope="module")
def store_env(stack: devstack.StackState) -> dict[str, str]:
    """What `rillet dev env` prints, as a user's `eval $(rillet dev env)` sets it."""
    if stack.object_store is None:
        pytest.fail(
            "the stack runs without the object store (`rillet dev up --object-store`, as "
            "`make test` starts it); these tests need it"
        )
    printed = subprocess.run(
        [sys.executable, "-m", "rillet.cli", "dev", "env"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    exports = [line.removeprefix("export ") for line in printed.splitlines()]
    return dict(line.split("=", 1) for line in exports if "=" in line)


def client(endpoint: str, access_key: str, secret_key: str) -> Minio:
    """An S3 client of the store's endpoint (http://host:port), failing fast."""
    return Minio(
        endpoint.removeprefix("http://"),
        access_key=access_key,
        secret_key=secret_key,
        secure=False,
        region="us-east-1",
        http_client=urllib3.PoolManager(timeout=urllib3.Timeout(connect=5, read=30), retries=2),
    )


def env_client(env: dict[str, str], *, access_key: str = "", secret_key: str = "") -> Minio:
    return client(
        env["RILLET_S3_ENDPOINT"],
        access_key or env["RILLET_S3_ACCESS_KEY_ID"],
        secret_key or env["RILLET_S3_SECRET_ACCESS_KEY"],
    )


def test_env_names_endpoint_bucket_and_key(
    stack: devstack.StackState, store_env: dict[str, str]
) -> None:
    assert set(STORE_VARIABLES) <= set(store_env)
    assert store_env["RILLET_S3_BUCKET"] == "rillet"
    host = devnode.NODE_ADDRESS if stack.node else "127.0.0.1"
    assert store_env["RILLET_S3_ENDPOINT"].startswith(f"http://{host}:")


def test_status_shows_the_store(store_env: dict[str, str]) -> None:
    status = subprocess.run(
        [sys.executable, "-m", "rillet.cli", "dev", "status"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )

    assert status.returncode == 0, status.stderr
    lines = status.stderr.splitlines()
    assert any(line.split()[:1] == ["seaweedfs"] and "running" in line for line in lines)
    assert f"s3 {store_env['RILLET_S3_ENDPOINT']}  bucket rillet" in lines


def test_object_written_is_listed_and_read_back(store_env: dict[str, str]) -> None:
    s3, bucket = env_client(store_env), store_env["RILLET_S3_BUCKET"]
    prefix = f"{isolation.PREFIX}{isolation.new_id()}/"
    body = secrets.token_bytes(70_000)
    s3.put_object(bucket, f"{prefix}part-0", io.BytesIO(body), len(body))
    try:
        listed = [(o.object_name, o.size) for o in s3.list_objects(bucket, prefix=prefix)]
        response = s3.get_object(bucket, f"{prefix}part-0")
        try:
            read = response.read()
        finally:
            response.close()
            response.release_conn()
    finally:
        s3.remove_object(bucket, f"{prefix}part-0")

    assert listed == [(f"{prefix}part-0", len(body))]
    assert read == body
    assert not list(s3.list_objects(bucket, prefix=prefix))


def test_wrong_key_is_refused(store_env: dict[str, str]) -> None:
    bucket = store_env["RILLET_S3_BUCKET"]
    unknown = env_client(store_env, access_key="AKIAUNKNOWN000000000", secret_key="x" * 40)
    wrong_secret = env_client(store_env, secret_key="x" * 40)

    with pytest.raises(S3Error) as refused:
        list(unknown.list_objects(bucket))
    with pytest.raises(S3Error) as mismatched:
        list(wrong_secret.list_objects(bucket))

    assert refused.value.code == "InvalidAccessKeyId"
    assert mismatched.value.code == "SignatureDoesNotMatch"


def test_secret_holds_the_key_a_client_can_use(kube: Kube, store_env: dict[str, str]) -> None:
    found = json.loads(
        kube.kubectl("get", "secret", "rillet-objectstore", "-n", "default", "-o", "json").stdout
    )
    data = {key: base64.b64decode(value).decode() for key, value in found["data"].items()}

    assert data == {
        "AWS_ACCESS_KEY_ID": store_env["RILLET_S3_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": store_env["RILLET_S3_SECRET_ACCESS_KEY"],
    }
    from_secret = client(
        store_env["RILLET_S3_ENDPOINT"], data["AWS_ACCESS_KEY_ID"], data["AWS_SECRET_ACCESS_KEY"]
    )
    assert from_secret.bucket_exists(store_env["RILLET_S3_BUCKET"])


POD_READS = """
import os, sys, urllib.error, urllib.request
print("body:", urllib.request.urlopen(sys.argv[1], timeout=30).read().decode())
try:
    urllib.request.urlopen(sys.argv[2], timeout=30)
    print("unsigned: 200")
except urllib.error.HTTPError as error:
    print("unsigned:", error.code)
print("key id:", os.environ["AWS_ACCESS_KEY_ID"])
print("secret length:", len(os.environ["AWS_SECRET_ACCESS_KEY"]))
"""


def _pod(image: str, args: list[str]) -> dict[str, object]:
    """A pod running POD_READS with the key from the copied Secret as its environment."""
    secret_env = [
        {"name": key, "valueFrom": {"secretKeyRef": {"name": "rillet-objectstore", "key": key}}}
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    ]
    container = {
        "name": "main",
        "image": image,
        "imagePullPolicy": "Never",
        "command": ["python3", "-c", POD_READS, *args],
        "env": secret_env,
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "reader"},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }


def _phase(kube: Kube, namespace: str) -> str:
    jsonpath = "jsonpath={.status.phase}"
    return kube.kubectl("get", "pod", "reader", "-n", namespace, "-o", jsonpath).stdout


def test_a_pod_on_the_node_reaches_the_store(
    kube: Kube, runtime_image: str, namespace: str, store_env: dict[str, str]
) -> None:
    s3, bucket = env_client(store_env), store_env["RILLET_S3_BUCKET"]
    name = f"{isolation.PREFIX}{isolation.new_id()}/from-the-host"
    s3.put_object(bucket, name, io.BytesIO(b"hello pod"), 9)
    try:
        signed = s3.presigned_get_object(bucket, name, expires=timedelta(minutes=10))
        unsigned = f"{store_env['RILLET_S3_ENDPOINT']}/{bucket}/{name}"
        kube.kubectl(
            *("create", "secret", "generic", "rillet-objectstore", "-n", namespace),
            f"--from-literal=AWS_ACCESS_KEY_ID={store_env['RILLET_S3_ACCESS_KEY_ID']}",
            f"--from-literal=AWS_SECRET_ACCESS_KEY={store_env['RILLET_S3_SECRET_ACCESS_KEY']}",
        )
        pod = _pod(runtime_image, [signed, unsigned])
        kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(pod))
        phase = wait_for(
            lambda: p if (p := _phase(kube, namespace)) in ("Succeeded", "Failed") else None,
            timeout=180,
            interval=1,
            what=f"pod {namespace}/reader to finish",
        )
        logs = kube.kubectl("logs", "-n", namespace, "reader").stdout
    finally:
        s3.remove_object(bucket, name)

    assert phase == "Succeeded", logs
    assert logs.splitlines() == [
        "body: hello pod",
        "unsigned: 403",
        f"key id: {store_env['RILLET_S3_ACCESS_KEY_ID']}",
        f"secret length: {len(store_env['RILLET_S3_SECRET_ACCESS_KEY'])}",
    ]
