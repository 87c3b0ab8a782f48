"""An App whose checkpoint is in the stack's object store (s3a://), on a stack of two nodes.

The stack's store (SeaweedFS) is named by RILLET_S3_ENDPOINT and RILLET_S3_BUCKET, and its key
pair is in the Secret `rillet-objectstore` of namespace default (keys AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY), which a user copies into the App's namespace.

One App, one Spark start, for every assertion:

Test plan:
- the word count over 120,000 lines in 6 partitions, checkpointed at s3a://<bucket>/<unique>
  with the store's endpoint and the Secret (checkpoint.secretRef): the Table equals the ground
  truth the test computed as it produced the lines;
- its two executors run on both nodes (the spread of a remote checkpoint), and the driver
  claims no volume;
- the checkpoint is in the bucket: its offsets, commits and state objects, listed by a client
  of the test's own (S3's ListObjectsV2, signed here with the key pair);
- the key pair's values appear nowhere Rillet writes or logs: not in the namespace's ConfigMaps,
  the pods' specs (args, env), the App's status, the namespace's Events, the operator's log,
  nor the driver's and executors' logs.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import json
import os
import urllib.parse
import urllib.request
import uuid
import xml.etree.ElementTree as ElementTree

import pytest

from rillet_devstack.operating import OperatorProcess

from .conftest import Kube
from .objects import apply, get
from .polling import wait_for
from .test_apps_on_node import (
    COUNT_WORDS,
    SMALL,
    driver_running,
    names,
    produce_lines,
    running,
    wait_table,
    word_count,
)

STORE_SECRET = "rillet-objectstore"
KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
REGION = "us-east-1"  # what SeaweedFS signs with; S3A needs none with an endpoint


def _store() -> tuple[str, str]:
    """The stack's object store: its endpoint and bucket."""
    endpoint, bucket = os.environ.get("RILLET_S3_ENDPOINT"), os.environ.get("RILLET_S3_BUCKET")
    if not endpoint or not bucket:
        pytest.fail("RILLET_S3_ENDPOINT and RILLET_S3_BUCKET name the stack's object store")
    return endpoint, bucket


def _copy_store_secret(kube: Kube, namespace: str) -> dict[str, str]:
    """The store's Secret copied into the namespace, as a user would; its decoded values."""
    secret = kube.api.read("secret", STORE_SECRET, "default")
    assert secret is not None, f"no Secret default/{STORE_SECRET}: the stack makes it"
    data = {key: secret["data"][key] for key in KEYS}
    apply(
        kube,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": STORE_SECRET, "namespace": namespace},
            "type": "Opaque",
            "data": data,
        },
    )
    return {key: base64.b64decode(value).decode() for key, value in data.items()}


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def list_objects(endpoint: str, bucket: str, prefix: str, keys: dict[str, str]) -> list[str]:
    """The keys under `prefix` in the bucket: S3 ListObjectsV2 with a Signature V4 of our own
    (an independent client: not S3A, not the AWS SDK the App uses), every page."""
    found: list[str] = []
    token: str | None = None
    while True:
        query = {
            "list-type": "2",
            "prefix": prefix,
            **({"continuation-token": token} if token else {}),
        }
        root = ElementTree.fromstring(_signed_get(endpoint, f"/{bucket}", query, keys))
        space = {"s3": root.tag.split("}")[0].strip("{")} if root.tag.startswith("{") else {}
        tag = "s3:" if space else ""
        found += [item.text or "" for item in root.iterfind(f"{tag}Contents/{tag}Key", space)]
        token = root.findtext(f"{tag}NextContinuationToken", None, space)
        if not token:
            return found


def _signed_get(endpoint: str, path: str, query: dict[str, str], keys: dict[str, str]) -> bytes:
    now = datetime.datetime.now(datetime.UTC)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    host = urllib.parse.urlsplit(endpoint).netloc
    canonical_query = "&".join(
        f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
        for k, v in sorted(query.items())
    )
    payload = hashlib.sha256(b"").hexdigest()
    headers = {"host": host, "x-amz-content-sha256": payload, "x-amz-date": stamp}
    signed = ";".join(sorted(headers))
    canonical = "\n".join(
        [
            "GET",
            urllib.parse.quote(path),
            canonical_query,
            "".join(f"{k}:{headers[k]}\n" for k in sorted(headers)),
            signed,
            payload,
        ]
    )
    scope = f"{day}/{REGION}/s3/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = ("AWS4" + keys["AWS_SECRET_ACCESS_KEY"]).encode()
    for part in (day, REGION, "s3", "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    authorization = (
        f"AWS4-HMAC-SHA256 Credential={keys['AWS_ACCESS_KEY_ID']}/{scope}, "
        f"SignedHeaders={signed}, Signature={signature}"
    )
    request = urllib.request.Request(
        f"{endpoint.rstrip('/')}{path}?{canonical_query}",
        headers={
            **{k: v for k, v in headers.items() if k != "host"},
            "Authorization": authorization,
        },
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        body: bytes = response.read()
        return body


def _everything_written(kube: Kube, namespace: str, operator: OperatorProcess) -> dict[str, str]:
    """Where the key pair must not be, by what it is: each as text."""
    pods = kube.api.list("pod", namespace)
    texts = {
        "ConfigMaps": json.dumps(kube.api.list("configmap", namespace)),
        "pod specs": json.dumps([pod["spec"] for pod in pods]),
        "App status": json.dumps([app.get("status") for app in kube.api.list("app", namespace)]),
        "Events": json.dumps(kube.api.list("event", namespace)),
        "operator log": operator.log.read_text(errors="replace"),
    }
    for pod in pods:
        name = pod["metadata"]["name"]
        logs = kube.kubectl("logs", "-n", namespace, name, "--all-containers", check=False)
        texts[f"log of {name}"] = logs.stdout + logs.stderr
    return texts


def test_an_app_checkpointed_in_the_object_store_runs_on_both_nodes_exactly(
    kube: Kube,
    namespace: str,
    kafka_prefix: str,
    runtime_image: str,
    kafka_bootstrap: str,
    operator: OperatorProcess,
) -> None:
    endpoint, bucket = _store()
    keys = _copy_store_secret(kube, namespace)
    prefix = f"{namespace}-{uuid.uuid4().hex[:8]}"
    app, lines, counts = names(kafka_prefix)
    documents = word_count(
        app, namespace, image=runtime_image, reads=lines, writes=counts, sql=COUNT_WORDS
    )
    spec = documents[-1]["spec"]
    spec["scaling"] = {"minExecutors": 2, "maxExecutors": 2, "lagTarget": 20000}
    spec["executor"] = SMALL
    spec["checkpoint"] = {
        "location": f"s3a://{bucket}/{prefix}",
        "endpoint": endpoint,
        "secretRef": {"name": STORE_SECRET},
    }
    apply(kube, *documents)
    wait_for(driver_running(kube, namespace), timeout=240, interval=2, what="the driver Running")

    truth = produce_lines(kafka_bootstrap, lines, 120_000, seed=36)
    wait_table(kafka_bootstrap, counts, truth, timeout=600)

    # The executors went to both nodes; the driver is free to (no claim holds it to one).
    executors = running(kube, namespace, "executor")
    assert len(executors) == 2, [p["metadata"]["name"] for p in executors]
    assert len({p["spec"]["nodeName"] for p in executors}) == 2, [
        (p["metadata"]["name"], p["spec"]["nodeName"]) for p in executors
    ]
    stateful_set = get(kube, "statefulset", f"{app}-driver", namespace)
    assert "volumeClaimTemplates" not in stateful_set["spec"]

    # The checkpoint, as the store itself lists it.
    stored = list_objects(endpoint, bucket, f"{prefix}/", keys)
    for part in ("/offsets/", "/commits/", "/state/"):
        assert any(part in key for key in stored), (part, stored[:20])

    # The key pair's values appear nowhere Rillet writes or logs.
    for where, text in _everything_written(kube, namespace, operator).items():
        for name, value in keys.items():
            assert value not in text, f"the value of {name} appears in the {where}"
