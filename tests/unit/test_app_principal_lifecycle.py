"""Per-App Kafka principals across clusters and over time, the pure parts.

Test plan:
- the cluster id is the first 8 hex digits of kube-system's uid; anything else is refused;
- two clusters name the App `shop/billing` differently, and a name parses back to its App only
  for the cluster that made it (never another cluster's, a legacy `rillet.<ns>.<app>`, a
  person's user);
- an App's Secret decides its username only if it records one Rillet gives that App (the
  current name, or the one before cluster ids: never renamed); another (the operator's own,
  another App's) is refused, and none recorded is the current name;
- the sweep removes this cluster's users of watched namespaces whose App is gone, and keeps
  another cluster's users, users of unwatched namespaces (kopf's patterns: globs, `!`) and
  users of Apps that exist;
- rotation is due only when the App's token is set and differs from the Secret's record;
- the driver pod template carries the App's rotation token (a new token rolls the driver),
  only with App principals on; without the annotation the template is as before (an upgrade
  rolls no driver); the App's principal carries the token for provisioning;
- kopf, which leaves annotations under its storage prefix (rillet.io/) out of the changes it
  reacts to, sees a new token as a change of the App (the field the App handlers declare).
"""

from __future__ import annotations

from typing import Any, cast

import kopf
import pytest
import yaml

from rillet.driverapi import runspecs
from rillet.handlers import apps as app_handlers
from rillet.handlers import lifecycle
from rillet.reconcile import kafkaaccess, manifests, principalsweeps, runresolving
from rillet.reconcile.appobjects import building, contexts
from rillet.settings import OperatorSettings

pytestmark = pytest.mark.unit

HERE = "5f2b9c01"
THERE = "a0e4d7c3"
LOGIN = runspecs.KafkaLogin(
    security_protocol="SASL_SSL",
    sasl_mechanism="SCRAM-SHA-512",
    credentials_dir=kafkaaccess.CREDENTIALS_DIR,
    ca=True,
)
APP = """
apiVersion: rillet.io/v1alpha1
kind: Topic
metadata: {name: orders, namespace: shop}
spec: {partitions: 3}
---
apiVersion: rillet.io/v1alpha1
kind: App
metadata:
  name: billing
  namespace: shop
  uid: 7d3c0a8e-0000-4000-8000-000000000002
  annotations: ANNOTATIONS
spec:
  image: rillet/runtime:0.1.0
  inputs: [{name: orders, topicRef: {name: orders}, format: string}]
  pipeline: {sql: "SELECT value FROM orders"}
  outputs: [{topicRef: {name: orders}}]
"""


def test_the_cluster_id_is_the_start_of_kube_systems_uid() -> None:
    assert kafkaaccess.cluster_id("5F2B9C01-77aa-4bb1-9c2d-0123456789ab") == HERE
    for not_a_uid in ("", "5f2b", "kube-system", "5f2b9c0z-0000"):
        with pytest.raises(ValueError, match="not a uid"):
            kafkaaccess.cluster_id(not_a_uid)


def test_two_clusters_never_share_an_apps_user_and_a_name_parses_back_for_its_own() -> None:
    here = kafkaaccess.principal_name(cluster=HERE, namespace="shop", app="billing")
    there = kafkaaccess.principal_name(cluster=THERE, namespace="shop", app="billing")
    assert here == f"rillet.{HERE}.shop.billing" != there
    assert kafkaaccess.owner_of(here, cluster=HERE) == ("shop", "billing")
    assert kafkaaccess.owner_of(f"rillet.{HERE}.shop.a.b", cluster=HERE) == ("shop", "a.b")
    for foreign in (there, "rillet.shop.billing", "alice", f"rillet.{HERE}.shop", f"x.{HERE}.a.b"):
        assert kafkaaccess.owner_of(foreign, cluster=HERE) is None


def test_a_secret_keeps_its_apps_username_only_if_rillet_gives_that_name_to_that_app() -> None:
    def user(recorded: str | None) -> str | None:
        return kafkaaccess.username_of(recorded, cluster=HERE, namespace="shop", app="billing")

    assert user(None) == f"rillet.{HERE}.shop.billing"
    assert user(f"rillet.{HERE}.shop.billing") == f"rillet.{HERE}.shop.billing"
    assert user("rillet.shop.billing") == "rillet.shop.billing"  # made before cluster ids
    for foreign in ("admin", f"rillet.{HERE}.bank.billing", f"rillet.{THERE}.shop.billing"):
        assert user(foreign) is None


def test_the_sweep_removes_only_this_clusters_users_of_watched_namespaces_without_an_app() -> None:
    users = [
        f"rillet.{HERE}.shop.gone",
        f"rillet.{HERE}.shop.billing",  # its App exists
        f"rillet.{THERE}.shop.gone",  # another cluster's
        f"rillet.{HERE}.kube-system.gone",  # an unwatched namespace
        f"rillet.{HERE}.team-a.gone",
        "rillet.shop.gone",  # made before cluster ids: never named by this cluster
        "admin",
    ]
    apps = {("shop", "billing")}
    assert principalsweeps.orphans(users, cluster=HERE, patterns=["shop", "team-*"], apps=apps) == (
        f"rillet.{HERE}.shop.gone",
        f"rillet.{HERE}.team-a.gone",
    )
    assert principalsweeps.orphans(users, cluster=HERE, patterns=["!kube-system"], apps=apps) == (
        f"rillet.{HERE}.shop.gone",
        f"rillet.{HERE}.team-a.gone",
    )
    assert f"rillet.{HERE}.kube-system.gone" in principalsweeps.orphans(
        users, cluster=HERE, patterns=[], apps=apps
    )


def test_namespace_patterns_match_as_kopfs_do() -> None:
    pattern = "myapp-*, !*-pr-*, *pr-123"
    assert principalsweeps.watched("myapp-live", [pattern])
    assert principalsweeps.watched("myapp-pr-123", [pattern])
    assert not principalsweeps.watched("myapp-pr-456", [pattern])
    assert not principalsweeps.watched("otherapp-pr-123", [pattern])
    assert principalsweeps.watched("otherapp-pr-123", ["!*-pr-*, *pr-123"])
    assert principalsweeps.watched("b", ["a", "b"])
    assert not principalsweeps.watched("c", ["a", "b"])


def test_rotation_is_due_when_the_apps_token_differs_from_the_secrets() -> None:
    assert kafkaaccess.rotation_due(requested="2026-11-29", recorded=None)
    assert kafkaaccess.rotation_due(requested="2", recorded="1")
    assert not kafkaaccess.rotation_due(requested="1", recorded="1")
    assert not kafkaaccess.rotation_due(requested=None, recorded="1")
    assert not kafkaaccess.rotation_due(requested="", recorded=None)


def _objects(annotations: str, login: runspecs.KafkaLogin | None) -> building.AppObjects:
    found = manifests.parse_manifests(yaml.safe_load_all(APP.replace("ANNOTATIONS", annotations)))
    app = found.apps["billing"]
    run_spec = runresolving.build_run_spec(
        app,
        topics_by_name=found.topics,
        tables_by_name={},
        bootstrap_servers="kafka:9093",
        checkpoint_location="/ck",
        kafka_login=login,
    )
    env = contexts.AppEnvironment(
        kafka_bootstrap="kafka:9093", kafka_login=login, kafka_cluster=HERE
    )
    return building.build_app_objects(app, run_spec, env)


def _template_annotations(objects: building.AppObjects) -> dict[str, str]:
    return dict(objects.stateful_set["spec"]["template"]["metadata"]["annotations"])


def test_a_new_rotation_token_changes_the_driver_template_and_reaches_provisioning() -> None:
    plain = _objects("{}", LOGIN)
    first = _objects('{"rillet.io/rotate-credentials": "1"}', LOGIN)
    second = _objects('{"rillet.io/rotate-credentials": "2"}', LOGIN)
    assert "rillet.io/rotated-credentials" not in _template_annotations(plain)
    assert _template_annotations(first)["rillet.io/rotated-credentials"] == "1"
    assert _template_annotations(second)["rillet.io/rotated-credentials"] == "2"
    assert plain.kafka_access is not None
    assert plain.kafka_access.rotation is None
    assert second.kafka_access is not None
    assert second.kafka_access.rotation == "2"
    # Only the template's annotation changes: the run spec (and its hash) stay.
    assert plain.spec_hash == second.spec_hash
    off = _objects('{"rillet.io/rotate-credentials": "1"}', None)
    assert "rillet.io/rotated-credentials" not in _template_annotations(off)


def test_kopf_sees_a_new_rotation_token_as_a_change_of_the_app() -> None:
    settings = kopf.OperatorSettings()
    lifecycle.configure(settings, OperatorSettings())
    diffbase, progress = (
        settings.persistence.diffbase_storage,
        settings.persistence.progress_storage,
    )
    marked = {"rillet.io/kopf-managed": "yes"}  # kopf marks the prefix its storage uses
    rotated = {**marked, kafkaaccess.ROTATE_ANNOTATION: "1"}
    before = kopf.Body(cast(Any, {"metadata": {"annotations": marked}, "spec": {"image": "x"}}))
    after = kopf.Body(cast(Any, {"metadata": {"annotations": rotated}, "spec": {"image": "x"}}))
    fields: list[Any] = [app_handlers.ROTATION_FIELD]

    def essence(body: kopf.Body, **options: Any) -> Any:
        # As kopf compares the last handled state with the new one (reactor.processing).
        return progress.clear(essence=diffbase.build(body=body, **options))

    # Without the declared field the token is invisible to kopf; with it, it is a change.
    assert essence(before) == essence(after)
    assert essence(before, extra_fields=fields) != essence(after, extra_fields=fields)
