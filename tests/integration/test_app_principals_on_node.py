"""Each App its own Kafka principal, on a SASL_SSL Kafka with ACLs enforced, its pods on the node.

Test plan (a broker of the test's own: SCRAM-SHA-512, the StandardAuthorizer with
allow.everyone.if.no.acl.found=false, a certificate from a CA of the test's own, listening on
the node's address; an operator with the admin's credentials and `kafka.appPrincipals` on):
- the word count runs as its own SCRAM user `rillet.<cluster>.<ns>.<app>` (`<cluster>`: the
  first 8 hex digits of kube-system's uid): the Table equals the ground truth, and Kafka holds
  exactly the ACLs its spec needs (READ on its input, WRITE on its Table, its groups);
- a second App reading a topic that is no Topic of its own (`external`) is refused by Kafka:
  the App is Stalled (KafkaAccessDenied) naming its principal and the topic; given the Topic
  as its input instead (a changed spec), it is granted it and becomes Ready, and its
  exactly-once output holds each line written after that once for a read_committed consumer
  (its executors' transactions, as its principal); each line carries its count in the word
  count's Table, which the changed spec looks up (`lookups`: executors reading the Table and
  the driver pinning it, as its principal);
- neither generated password nor the operator's own Kafka admin password (which it reads from
  files: it is not in its environment) appears in the operator's log, the pods' logs, the pod
  specs, StatefulSets, ConfigMaps, annotations, Events or the Rillet objects (status included),
  and the admin's is in no Secret of the namespace either; the Spark UI (which would show the
  environment and SQL plans) does not answer, the driver's metrics port does;
- a new token on the word count's `rillet.io/rotate-credentials` rotates its password: the
  Secret holds a new one, the old one no longer logs in and the new one does, an Event
  CredentialsRotated says so (without either password), the driver restarts and the Table
  keeps counting every line exactly;
- once the App is deleted its user no longer logs in, and no ACL or SCRAM credential of it
  is left (one of the other mechanism, added by hand, included).
(A user Rillet did not make, a Secret it did not make, and the sweep of users whose App is
gone: test_app_principal_sweep_on_node.py.)
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from rillet.driverapi import wiring
from rillet.tables import tables
from rillet_devstack.kafka import KafkaCluster
from rillet_devstack.operating import OperatorProcess

from . import principals
from .conftest import Kube
from .namespacefixtures import RILLET_PLURALS
from .objects import apply, get, wait_condition
from .polling import wait_for
from .wordcounts import (
    C1_ONLY,
    COUNT_WORDS,
    SMALL,
    driver_running,
    names,
    pods,
    produce_lines,
    stalled,
    wait_table,
    word_count,
)

# Spark's UI port (its default), off in every App's pods (sparkdefaults.SECURITY_DEFAULTS).
SPARK_UI_PORT = 4040


def _logs(kube: Kube, namespace: str) -> list[str]:
    """Every container log of the namespace's pods, the previous run's too."""
    found = []
    for pod in pods(kube, namespace, "driver") + pods(kube, namespace, "executor"):
        name = pod["metadata"]["name"]
        for previous in ("--previous=false", "--previous=true"):
            result = kube.kubectl("logs", name, "-n", namespace, previous, check=False)
            found.append(result.stdout)
    return found


def _shown(kube: Kube, namespace: str, operator: OperatorProcess) -> list[str]:
    """What anyone who may read the namespace (or the operator's log) sees: the operator's log
    first, the pods' logs, then the objects (specs, annotations, statuses) and Events last."""
    return [
        operator.log.read_text(encoding="utf-8", errors="replace"),
        *_logs(kube, namespace),
        kube.kubectl("get", "pods,configmaps,statefulsets", "-n", namespace, "-o", "json").stdout,
        # Read through the API, not `kubectl get rillet`: kubectl expands a category from
        # whatever discovery it holds, ignoring errors, and a partial answer (other tests' CRDs
        # come and go meanwhile) once left it none: "doesn't have a resource type rillet".
        json.dumps([kube.api.list(plural, namespace) for plural in RILLET_PLURALS]),
        kube.kubectl("get", "events", "-n", namespace, "-o", "json").stdout,
    ]


def _secret_values(kube: Kube, namespace: str) -> str:
    """Every value of every Secret of the namespace, decoded, one a line."""
    listed = json.loads(kube.kubectl("get", "secrets", "-n", namespace, "-o", "json").stdout)
    return "\n".join(
        base64.b64decode(value).decode(errors="replace")
        for secret in listed["items"]
        for value in (secret.get("data") or {}).values()
    )


def _answers(kube: Kube, namespace: str, app: str, port: int, path: str) -> bool:
    """Whether a port of the App's driver pod answers `path`, through the apiserver's proxy."""
    raw = f"/api/v1/namespaces/{namespace}/pods/{app}-driver-0:{port}/proxy{path}"
    return kube.kubectl("get", "--raw", raw, check=False).returncode == 0


def _committed_records(cluster: KafkaCluster, topic: str) -> int:
    """The records of `topic` a read_committed consumer sees (the admin's login)."""
    entries = tables.read_changelog(
        bootstrap_servers=cluster.bootstrap, topic=topic, kafka_config=cluster.client_config()
    )
    return len(entries)


def test_each_app_logs_in_as_its_own_principal_allowed_only_its_topics(
    kube: Kube,
    kafka_prefix: str,
    runtime_image: str,
    node_secured_kafka: KafkaCluster,
    lone_operator: Callable[..., OperatorProcess],
) -> None:
    cluster = node_secured_kafka
    security = cluster.security
    assert security is not None
    admin_config = cluster.client_config()
    admin = AdminClient(admin_config)
    own = lone_operator(settings=principals.settings(cluster))
    own.start()
    namespace = own.namespace_pattern

    app, lines, counts = names(kafka_prefix)
    apply(
        kube,
        *word_count(
            app, namespace, image=runtime_image, reads=lines, writes=counts, sql=COUNT_WORDS
        ),
    )
    wait_for(
        driver_running(kube, namespace), timeout=240, interval=2, what="the driver pod Running"
    )
    cluster_id = principals.cluster_id(kube)
    user = f"rillet.{cluster_id}.{namespace}.{app}"
    group = f"rillet.{namespace}.{app}"  # its consumer group: the same in every cluster
    assert principals.acls(admin, user) == {
        ("TOPIC", lines, "LITERAL", "READ"),
        ("TOPIC", lines, "LITERAL", "DESCRIBE_CONFIGS"),
        ("TOPIC", counts, "LITERAL", "WRITE"),
        ("GROUP", group, "LITERAL", "READ"),
        ("GROUP", f"{group}.", "PREFIXED", "READ"),
        ("TRANSACTIONAL_ID", f"{group}.", "PREFIXED", "WRITE"),
    }
    truth = produce_lines(cluster.bootstrap, lines, 20_000, seed=11, config=admin_config)
    wait_table(cluster.bootstrap, counts, truth, timeout=420, config=admin_config)

    intruder = f"{kafka_prefix}-intruder"
    apply(
        kube,
        {
            "apiVersion": "rillet.io/v1alpha1",
            "kind": "Topic",
            "metadata": {"name": f"{intruder}-out", "namespace": namespace},
            "spec": {"partitions": 1, "deletionPolicy": "Delete"},
        },
        {
            "apiVersion": "rillet.io/v1alpha1",
            "kind": "App",
            "metadata": {"name": intruder, "namespace": namespace},
            "spec": {
                "image": runtime_image,
                "inputs": [
                    {"name": "stolen", "external": {"topicName": lines}, "format": "string"}
                ],
                "pipeline": {"sql": "SELECT value FROM stolen"},
                "outputs": [{"topicRef": {"name": f"{intruder}-out"}, "delivery": "ExactlyOnce"}],
                "scaling": {"minExecutors": 1, "maxExecutors": 1},
                "driver": SMALL,
                "executor": SMALL,
                "sparkConf": C1_ONLY,
            },
        },
    )
    refused = wait_for(
        stalled(kube, intruder, namespace), timeout=300, interval=3, what="the intruder Stalled"
    )
    assert refused["reason"] == "KafkaAccessDenied", refused
    assert f"User:rillet.{cluster_id}.{namespace}.{intruder}" in refused["message"]
    assert f"topics [{lines}] (TOPIC_AUTHORIZATION_FAILED)" in refused["message"]

    passwords = [
        principals.password(kube, namespace, app),
        principals.password(kube, namespace, intruder),
    ]
    assert security.admin_password not in _secret_values(kube, namespace), (
        "the operator's admin password is in a Secret of the App's namespace"
    )
    assert own.process is not None  # it reads the password from files, not its environment
    environment = Path(f"/proc/{own.process.pid}/environ").read_bytes()
    assert security.admin_password.encode() not in environment, "in the operator's environment"
    shown = _shown(kube, namespace, own)
    assert shown[0], "the operator's log is empty"
    assert all(shown[-3:]), "an object is empty"
    # Spark's UI, which showed every setting and plan, does not listen; its metrics do.
    assert _answers(kube, namespace, app, wiring.METRICS_PORT, "/metrics")
    assert not _answers(kube, namespace, app, SPARK_UI_PORT, "/api/v1/applications")
    for password in passwords:
        assert not [text for text in shown if password in text], "a password was shown"
    assert not [text for text in shown if security.admin_password in text], (
        "the operator's admin password was shown"
    )

    # Given the Topic as its own input instead, the intruder is granted it before its new
    # driver starts, and runs.
    # Its output is exactly-once: its executors write in transactions as its principal. (Its
    # checkpoint starts at the end the refused run planned: lines written from now on.)
    # It also looks each line up in the word count's Table (a lookup: its executors read the
    # Table's topic, and its driver pins it in a group of its own, as its principal).
    own_input = {
        "name": "stolen",
        "topicRef": {"name": lines},
        "format": "string",
        "lookups": [{"table": "counts", "keyColumns": ["value"]}],
    }
    spec = {
        "inputs": [own_input, {"name": "counts", "tableRef": {"name": counts}}],
        "pipeline": {"sql": "SELECT value, counts.count AS count FROM stolen"},
    }
    patch = json.dumps({"spec": spec})
    kube.kubectl("patch", "app", intruder, "-n", namespace, "--type=merge", "-p", patch)
    wait_condition(kube, "app", intruder, namespace, timeout=300)
    granted = principals.acls(admin, f"rillet.{cluster_id}.{namespace}.{intruder}")
    assert ("TOPIC", lines, "LITERAL", "READ") in granted
    assert ("TOPIC", counts, "LITERAL", "READ") in granted
    assert ("TOPIC", f"{intruder}-out", "LITERAL", "READ") in granted  # its markers
    later = produce_lines(cluster.bootstrap, lines, 2_000, seed=12, config=admin_config)
    # Lines that are a word as the Table keys it (lowercase), after the counts above are in.
    producer = Producer({**admin_config, "bootstrap.servers": cluster.bootstrap})
    for _ in range(5):
        producer.produce(lines, value=b"kafka")
    assert producer.flush(30) == 0
    wait_for(
        lambda: _committed_records(cluster, f"{intruder}-out") == 2_005,
        timeout=300,
        interval=3,
        what="the intruder's 2,005 copies, read_committed",
    )
    looked_up = [
        json.loads(entry.value or b"{}")
        for entry in tables.read_changelog(
            bootstrap_servers=cluster.bootstrap,
            topic=f"{intruder}-out",
            kafka_config=admin_config,
        )
    ]
    # At least the count the Table held before these lines (the word count reads them too).
    kafka = [row["count"] for row in looked_up if row["value"] == "kafka"]
    assert len(kafka) == 5
    assert all(isinstance(n, int) and n >= truth["kafka"] > 0 for n in kafka), kafka
    assert all(row["count"] is None for row in looked_up if row["value"] != "kafka")
    truth += later
    truth["kafka"] += 5

    # Rotation: a new token on the App's annotation; the driver restarts with the new password.
    assert principals.logs_in(cluster, user, passwords[0])
    driver_uid = get(kube, "pod", f"{app}-driver-0", namespace)["metadata"]["uid"]
    kube.kubectl(
        "annotate", "app", app, "-n", namespace, "rillet.io/rotate-credentials=first", "--overwrite"
    )
    wait_for(
        lambda: (
            principals.secret(kube, namespace, app)["metadata"]
            .get("annotations", {})
            .get("rillet.io/rotated-credentials")
            == "first"
        ),
        timeout=120,
        interval=2,
        what="the Secret recording the rotation",
    )
    rotated = principals.password(kube, namespace, app)
    assert rotated != passwords[0]
    assert not principals.logs_in(cluster, user, passwords[0]), "the old password still logs in"
    assert principals.logs_in(cluster, user, rotated)
    said = wait_for(
        lambda: principals.events(kube, namespace, "CredentialsRotated"),
        timeout=60,
        interval=2,
        what="an Event CredentialsRotated",
    )
    assert user in said[0]["message"]
    wait_for(
        lambda: (p := driver_running(kube, namespace)()) and p["metadata"]["uid"] != driver_uid,
        timeout=240,
        interval=2,
        what="a new driver pod Running",
    )
    truth += produce_lines(cluster.bootstrap, lines, 3_000, seed=13, config=admin_config)
    wait_table(cluster.bootstrap, counts, truth, timeout=420, config=admin_config)
    shown = _shown(kube, namespace, own)
    assert not [text for text in shown if rotated in text], "the new password was shown"
    assert not [text for text in shown if security.admin_password in text], (
        "the operator's admin password was shown"
    )
    passwords[0] = rotated

    # A credential of the other SCRAM mechanism (set by hand, say) goes with the App too.
    other = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"set-by-hand"
    )
    admin.alter_user_scram_credentials([other])[user].result(timeout=30)
    kube.kubectl("delete", "app", app, "-n", namespace, "--wait=true", timeout=120)
    wait_for(
        lambda: not principals.acls(admin, user), timeout=60, interval=2, what="the App's ACLs gone"
    )
    assert not principals.logs_in(cluster, user, passwords[0]), (
        "the deleted App's user still logs in"
    )
    credentials = admin.describe_user_scram_credentials([user])
    assert isinstance(credentials, dict)
    with pytest.raises(KafkaException) as described:
        credentials[user].result(timeout=30)
    assert described.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
