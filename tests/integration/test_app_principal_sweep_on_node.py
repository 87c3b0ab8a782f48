"""Kafka users that are not an App's own, on a SASL_SSL Kafka with ACLs enforced: a user Rillet
did not make is left alone, a Secret it did not make is never used, and the users of Apps that
are gone are swept.

Test plan (a broker and an operator of the test's own, as in test_app_principals_on_node.py,
without Spark; the operator sweeps every 2 s):
- a SCRAM user of an App's name that exists before the App (no Secret records it) is left as
  it is (its password still logs in, no ACL is added), the App is Stalled PrincipalExists with
  a Warning Event of that reason, and no driver StatefulSet is made; the user deleted, the
  App gets its Secret and its user logs in with the Secret's password;
- a Secret `<app>-kafka` written by someone else, naming the operator's own user, is never
  used: without Rillet's label never even read, with it refused for the username; either App
  is Stalled ObjectNotOwned, the admin's password and ACLs are as they were, and deleting the
  Apps removes no user;
- the sweep removes a user of this cluster's id for an App that does not exist (and its ACLs),
  at start-up and again later, and keeps a user of another cluster's id, one of a namespace
  the operator does not watch, and that of an existing App.
"""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from rillet_devstack.kafka import KafkaCluster
from rillet_devstack.operating import OperatorProcess

from . import principals
from .conftest import Kube
from .objects import apply, exists
from .polling import wait_for
from .wordcounts import COUNT_WORDS, names, stalled, word_count


def _scram_users(admin: AdminClient) -> set[str]:
    return set(admin.describe_user_scram_credentials().result(timeout=30))  # type: ignore[union-attr]


def _add_user(admin: AdminClient, user: str, password: str) -> None:
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode()
    )
    admin.alter_user_scram_credentials([upsert])[user].result(timeout=30)


def test_a_foreign_user_is_left_alone_and_orphaned_users_of_this_cluster_are_swept(
    kube: Kube,
    kafka_prefix: str,
    runtime_image: str,
    node_secured_kafka: KafkaCluster,
    lone_operator: Callable[..., OperatorProcess],
) -> None:
    cluster = node_secured_kafka
    admin = AdminClient(cluster.client_config())
    own = lone_operator(
        settings={**principals.settings(cluster), "RILLET_APP_PRINCIPAL_SWEEP_SECONDS": "2"}
    )
    namespace = own.namespace_pattern
    cluster_id = principals.cluster_id(kube)
    app, lines, counts = names(kafka_prefix)
    user = f"rillet.{cluster_id}.{namespace}.{app}"
    orphan = f"rillet.{cluster_id}.{namespace}.{kafka_prefix}-gone"
    others = {
        f"rillet.{'0' * 8 if cluster_id != '0' * 8 else '1' * 8}.{namespace}.{kafka_prefix}-gone",
        f"rillet.{cluster_id}.default.{kafka_prefix}-gone",  # a namespace not watched
    }
    # Before the operator starts (its first sweep runs at start-up): the App exists already,
    # and so does a user of its name that Rillet did not make.
    _add_user(admin, user, "set-by-someone")
    for made in (orphan, *others):
        _add_user(admin, made, "left-behind")
    grant = AclBinding(
        ResourceType.TOPIC,
        lines,
        ResourcePatternType.LITERAL,
        f"User:{orphan}",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    admin.create_acls([grant])[grant].result(timeout=30)
    apply(
        kube,
        *word_count(
            app, namespace, image=runtime_image, reads=lines, writes=counts, sql=COUNT_WORDS
        ),
    )
    # Secrets of other Apps' names, written by someone else, naming the operator's user: one
    # as `kubectl create secret` makes it, one labelled as Rillet's.
    security = cluster.security
    assert security is not None
    forgeries = {"f": "", "g": "app.kubernetes.io/managed-by=rillet"}
    forged = {suffix: names(f"{kafka_prefix}-{suffix}") for suffix in forgeries}
    for suffix, label in forgeries.items():
        secret = f"{forged[suffix][0]}-kafka"
        kube.kubectl(
            "create", "secret", "generic", secret, "-n", namespace,
            f"--from-literal=username={security.admin_user}", "--from-literal=password=guessed",
        )  # fmt: skip
        if label:
            kube.kubectl("label", "secret", secret, "-n", namespace, label)
        forged_app, forged_lines, forged_counts = forged[suffix]
        apply(
            kube,
            *word_count(
                forged_app,
                namespace,
                image=runtime_image,
                reads=forged_lines,
                writes=forged_counts,
                sql=COUNT_WORDS,
            ),
        )
    own.start()

    # Not Rillet's by its label: never read (k8s.ownsecrets); Rillet's by its label, but naming
    # a user Rillet never gives that App: never used.
    said = {
        "f": f"Secret {forged['f'][0]}-kafka exists and was not made by Rillet",
        "g": f"records username '{security.admin_user}'",
    }
    for suffix, message in said.items():
        forged_app = forged[suffix][0]
        not_ours = wait_for(
            stalled(kube, forged_app, namespace),
            timeout=120,
            interval=2,
            what=f"the forged App {forged_app} Stalled",
        )
        assert not_ours["reason"] == "ObjectNotOwned", not_ours
        assert message in not_ours["message"], not_ours
        assert not exists(kube, "statefulset", f"{forged_app}-driver", namespace)
    assert not principals.acls(admin, security.admin_user)
    for forged_app, _, _ in forged.values():
        kube.kubectl("delete", "app", forged_app, "-n", namespace, "--wait=true", timeout=120)
    assert principals.logs_in(cluster, security.admin_user, security.admin_password)

    refused = wait_for(
        stalled(kube, app, namespace), timeout=120, interval=2, what="the App Stalled"
    )
    assert refused["reason"] == "PrincipalExists", refused
    assert user in refused["message"]
    assert "delete that user" in refused["message"]
    warned = wait_for(
        lambda: principals.events(kube, namespace, "PrincipalExists"),
        timeout=60,
        interval=2,
        what="an Event PrincipalExists",
    )
    assert warned[0]["type"] == "Warning"
    assert principals.logs_in(cluster, user, "set-by-someone"), (
        "the foreign user's password was changed"
    )
    assert not principals.acls(admin, user)
    assert not exists(kube, "statefulset", f"{app}-driver", namespace)
    assert not exists(kube, "secret", f"{app}-kafka", namespace)

    wait_for(
        lambda: orphan not in _scram_users(admin),
        timeout=60,
        interval=1,
        what="the orphaned user swept",
    )
    assert not principals.acls(admin, orphan)
    # A later pass sweeps a new orphan too, and has kept the others all along.
    later = f"rillet.{cluster_id}.{namespace}.{kafka_prefix}-gone-later"
    _add_user(admin, later, "left-behind")
    wait_for(
        lambda: later not in _scram_users(admin),
        timeout=60,
        interval=1,
        what="a later orphan swept",
    )
    assert others | {user} <= _scram_users(admin)

    # The foreign user deleted, the App makes its own (the scaling loop retries it).
    deletion = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)
    admin.alter_user_scram_credentials([deletion])[user].result(timeout=30)
    wait_for(
        lambda: exists(kube, "secret", f"{app}-kafka", namespace),
        timeout=120,
        interval=2,
        what="the App's Secret",
    )
    wait_for(
        lambda: principals.logs_in(cluster, user, principals.password(kube, namespace, app)),
        timeout=60,
        interval=2,
        what="the App's user logging in with its Secret's password",
    )
