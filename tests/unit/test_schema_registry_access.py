"""The operator's schema registry reaching the drivers of Avro (and Protobuf) Apps, and its
credentials kept secret.

Test plan:
- settings: the password is hidden in repr, str and dumps; a username without a password is
  refused at start;
- run spec: an Avro App resolved with the operator's registry (RILLET_SCHEMA_REGISTRY_*) carries
  its URL and the credentials' directory; without a username no directory and no Secret;
  without a URL an Avro App is Stalled InvalidSpec saying what to set; an App without Avro
  carries no registry, so its ConfigMap and spec hash are those of an operator without one;
  `rillet run` takes the URL from the same environment, without a directory;
- the Secret `<app>-schema-registry`: built for an App with an Avro input, output key or output
  value when the operator has credentials, without data, owned by the App; mounted read-only
  into the driver container alone (no executor sees it);
- a reconcile applies the Secret with the credentials before the App's objects, and the
  password is nowhere else in what it sends (env, args, ConfigMaps, annotations); a new
  password is written over the operator's own Secret; a Secret of that name the operator did
  not make is neither written nor taken over: the App is InvalidSpec naming it.
- Protobuf: the InvalidSpec and Secret cases again, with a protobuf input, output key or
  output value.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from pydantic import SecretStr, ValidationError

from rillet.cli import options as cli_options
from rillet.handlers import appreconciling, appregistry
from rillet.k8s import applying, ownsecrets
from rillet.reconcile import appobserving, appresolving
from rillet.reconcile.appobjects import building
from rillet.settings import AppSettings, KafkaSettings, SchemaRegistrySettings
from tests.unit import wordcount_inputs

URL = "http://registry.kafka:8080/apis/ccompat/v7"
PASSWORD = "s3cr3t-registry-p4ss"
CREDENTIALS = SchemaRegistrySettings(url=URL, username="rillet", password=SecretStr(PASSWORD))
NO_CREDENTIALS = SchemaRegistrySettings(url=URL, username=None, password=None)
NO_REGISTRY = SchemaRegistrySettings(url=None, username=None, password=None)
SECRET = "wordcount-schema-registry"
AVRO_OUTPUT = {"topicRef": {"name": "sentences"}, "keyColumns": ["word"]}
# An Avro input, an Avro output key, an Avro output value; the same in Protobuf.
AVRO_CHANGES = {
    "input": lambda app: app["spec"]["inputs"][0].update(format="avro"),
    "output key": lambda app: app["spec"]["outputs"].append({**AVRO_OUTPUT, "keyFormat": "avro"}),
    "output value": lambda app: app["spec"]["outputs"].append(
        {**AVRO_OUTPUT, "valueFormat": "avro"}
    ),
    "protobuf input": lambda app: app["spec"]["inputs"][0].update(format="protobuf"),
    "protobuf output key": lambda app: app["spec"]["outputs"].append(
        {**AVRO_OUTPUT, "keyFormat": "protobuf"}
    ),
    "protobuf output value": lambda app: app["spec"]["outputs"].append(
        {**AVRO_OUTPUT, "valueFormat": "protobuf"}
    ),
}


def _bodies(avro: str | None = "input") -> dict[str, dict[str, Any]]:
    found = wordcount_inputs.bodies()
    if avro is not None:
        AVRO_CHANGES[avro](found["App"])
    return found


def _resolve(
    registry: SchemaRegistrySettings, *, avro: str | None = "input"
) -> tuple[dict[str, Any], appresolving.Resolution]:
    found = _bodies(avro)
    env = appresolving.environment(
        AppSettings(), KafkaSettings(bootstrap="kafka:9092"), registry, apiserver_url="https://k"
    )
    views = wordcount_inputs.views(found["Topic"], found["Table"])
    return found["App"], appresolving.resolve(found["App"], views, env)


def _objects(
    registry: SchemaRegistrySettings, *, avro: str | None = "input"
) -> building.AppObjects:
    resolution = _resolve(registry, avro=avro)[1]
    assert resolution.objects is not None, resolution.spec_problems
    return resolution.objects


def _run_spec(objects: building.AppObjects) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(objects.config_map["data"]["run-spec.json"])
    return parsed


def _pod_spec(objects: building.AppObjects) -> dict[str, Any]:
    spec: dict[str, Any] = objects.stateful_set["spec"]["template"]["spec"]
    return spec


def test_the_password_is_hidden_and_needs_a_username_beside_it() -> None:
    for shown in (repr(CREDENTIALS), str(CREDENTIALS), CREDENTIALS.model_dump_json()):
        assert PASSWORD not in shown
    assert PASSWORD not in repr(appregistry.build(CREDENTIALS))
    with pytest.raises(ValidationError, match="USERNAME is set without"):
        SchemaRegistrySettings(url=URL, username="rillet", password=None)


@pytest.fixture
def registry_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's environment as the chart sets it (or `rillet dev env` exports it)."""
    monkeypatch.setenv("RILLET_SCHEMA_REGISTRY_URL", URL)
    monkeypatch.setenv("RILLET_SCHEMA_REGISTRY_USERNAME", "rillet")
    monkeypatch.setenv("RILLET_SCHEMA_REGISTRY_PASSWORD", PASSWORD)


@pytest.mark.usefixtures("registry_environment")
def test_an_avro_apps_run_spec_names_the_operators_registry_and_where_its_credentials_are() -> None:
    objects = _objects(SchemaRegistrySettings())

    assert _run_spec(objects)["schema_registry"] == {
        "url": URL,
        "credentials_dir": "/etc/rillet/schema-registry",
    }
    assert objects.registry_secret is not None


def test_without_a_username_the_driver_gets_the_url_alone() -> None:
    objects = _objects(NO_CREDENTIALS)

    assert _run_spec(objects)["schema_registry"] == {"url": URL}
    assert objects.registry_secret is None
    assert SECRET not in json.dumps(objects.stateful_set)


@pytest.mark.parametrize("avro", ["input", "protobuf input"])
def test_an_avro_app_without_a_registry_is_invalid_spec_saying_what_to_set(avro: str) -> None:
    app, resolution = _resolve(NO_REGISTRY, avro=avro)

    report = appobserving.derive_report(
        app, resolution, driver_pod=None, executor_pods=[], at=datetime.now(UTC)
    )

    assert resolution.objects is None
    conditions = {c["type"]: c for c in report.status_patch["conditions"]}
    assert report.status_patch["phase"] == "Failed"
    assert (conditions["Stalled"]["status"], conditions["Stalled"]["reason"]) == (
        "True",
        "InvalidSpec",
    )
    assert "set schemaRegistry.url" in conditions["Stalled"]["message"]


def test_an_app_without_avro_runs_as_if_the_operator_had_no_registry() -> None:
    with_registry = _objects(CREDENTIALS, avro=None)
    without = _objects(NO_REGISTRY, avro=None)

    assert "schema_registry" not in _run_spec(with_registry)
    assert with_registry.config_map == without.config_map
    assert with_registry.spec_hash == without.spec_hash
    assert with_registry.registry_secret is None


@pytest.mark.usefixtures("registry_environment")
def test_rillet_run_takes_the_registry_from_the_environment_without_a_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry = cli_options.schema_registry()

    assert registry is not None
    assert (registry.url, registry.credentials_dir) == (URL, None)
    monkeypatch.delenv("RILLET_SCHEMA_REGISTRY_URL")
    assert cli_options.schema_registry() is None


@pytest.mark.parametrize("avro", list(AVRO_CHANGES))
def test_an_avro_app_gets_an_owned_secret_without_data_mounted_by_its_driver_alone(
    avro: str,
) -> None:
    objects = _objects(CREDENTIALS, avro=avro)

    secret = objects.registry_secret
    assert secret is not None
    assert (secret["kind"], secret["type"]) == ("Secret", "Opaque")
    assert (secret["metadata"]["name"], secret["metadata"]["namespace"]) == (SECRET, "team")
    (owner,) = secret["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "App",
        wordcount_inputs.UID,
        True,
    )
    assert "data" not in secret
    assert "stringData" not in secret
    pod = _pod_spec(objects)
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["schema-registry-credentials"]["secret"] == {
        "secretName": SECRET,
        "defaultMode": 0o440,
    }
    (driver,) = pod["containers"]
    assert {
        "name": "schema-registry-credentials",
        "mountPath": "/etc/rillet/schema-registry",
        "readOnly": True,
    } in driver["volumeMounts"]
    executor_template = objects.config_map["data"]["executor-pod-template.yaml"]
    assert "schema-registry" not in executor_template


class FakeKube:
    """What a reconcile asks of the apiserver: Secrets as given, no pods, every apply kept."""

    def __init__(self, secrets: dict[str, dict[str, Any]] | None = None) -> None:
        self.secrets = secrets or {}
        self.sent: list[dict[str, Any]] = []
        self.created: list[dict[str, Any]] = []  # the App's Spark key

    async def read_own_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        """As the apiserver answers the operator's patch: a Secret without Rillet's label is
        refused (k8s.ownsecrets)."""
        found = self.secrets.get(name)
        labels = (found or {}).get("metadata", {}).get("labels") or {}
        if found is not None and labels.get("app.kubernetes.io/managed-by") != "rillet":
            raise applying.ForeignObjectError(ownsecrets.foreign_message(name))
        return found

    async def create_once(self, obj: dict[str, Any]) -> None:
        self.created.append(copy.deepcopy(obj))

    async def apply_all(self, objects: Sequence[dict[str, Any]]) -> None:
        self.sent.extend(copy.deepcopy(list(objects)))

    async def apply(self, objects: building.AppObjects) -> applying.Applied:
        self.sent.extend(copy.deepcopy(list(objects.in_apply_order())))
        return applying.Applied(created=True)

    async def driver_pod(self, namespace: str, app: str) -> None:
        return None

    async def executor_pods(self, namespace: str, app: str) -> list[dict[str, Any]]:
        return []


def _reconcile(kube: FakeKube, registry: SchemaRegistrySettings = CREDENTIALS) -> dict[str, Any]:
    found = _bodies("input")
    deps = appreconciling.AppDeps(
        kube=cast(applying.AppKube, kube),
        views=wordcount_inputs.views(found["Topic"], found["Table"]),
        env=appresolving.environment(
            AppSettings(),
            KafkaSettings(bootstrap="kafka:9092"),
            registry,
            apiserver_url="https://k",
        ),
        registry=appregistry.build(registry),
    )
    report = asyncio.run(appreconciling.reconcile(found["App"], deps))
    return report.status_patch


def _strings(node: Any) -> Iterator[str]:
    """Every key and value of a JSON-like object, and each decoded when it is base64."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield str(key)
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)
    else:
        yield str(node)
        # Not base64 (binascii.Error), or not text (UnicodeDecodeError): nothing to decode.
        with contextlib.suppress(ValueError):
            yield base64.b64decode(str(node), validate=True).decode()


def _decoded(secret: dict[str, Any]) -> dict[str, str]:
    return {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}


def test_a_reconcile_writes_the_credentials_first_and_the_password_nowhere_else() -> None:
    kube = FakeKube()

    _reconcile(kube)

    first, *others = kube.sent
    assert (first["kind"], first["metadata"]["name"]) == ("Secret", SECRET)
    assert _decoded(first) == {"username": "rillet", "password": PASSWORD}
    assert [o["kind"] for o in others][-1] == "StatefulSet"
    assert not [s for s in _strings(others) if PASSWORD in s]
    assert not [s for s in _strings({**first, "data": {}}) if PASSWORD in s]


def test_a_new_password_is_written_over_the_operators_own_secret() -> None:
    kube = FakeKube()
    _reconcile(kube)
    kube.secrets[SECRET] = kube.sent[0]
    rotated = CREDENTIALS.model_copy(update={"password": SecretStr("rotated-p4ss")})

    _reconcile(kube, rotated)

    (again,) = (o for o in kube.sent[1:] if o["kind"] == "Secret")
    assert _decoded(again)["password"] == "rotated-p4ss"


@pytest.mark.parametrize(
    "labels",
    [
        {"team": "payments"},  # never read: the apiserver refuses the operator's patch
        {"app.kubernetes.io/managed-by": "rillet", "rillet.io/app": "other"},  # another App's
    ],
)
def test_a_secret_of_that_name_the_operator_did_not_make_is_left_alone(
    labels: dict[str, str],
) -> None:
    theirs = {"metadata": {"name": SECRET, "labels": labels}, "data": {"k": "dg=="}}
    kube = FakeKube({SECRET: theirs})

    status = _reconcile(kube)

    assert kube.sent == []
    stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
    assert stalled["reason"] == "InvalidSpec"
    assert stalled["message"].startswith(f"Secret {SECRET} exists and was not made by Rillet")
