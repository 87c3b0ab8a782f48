"""The values of the Helm chart (charts/rillet), as a model: the source of values.schema.json.

Helm checks every install and upgrade against the schema, so a misspelled key or a wrong type is
refused with the key's path instead of being silently ignored: every object forbids keys it does
not know. The defaults here are the chart's values.yaml (a unit test holds them equal), and each
value the operator reads maps to one of its RILLET_* settings (rillet.settings).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

PullPolicy = Literal["Always", "IfNotPresent", "Never"]


class ChartModel(BaseModel):
    """A values object: camelCase keys as written in values.yaml, unknown keys refused."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class Image(ChartModel):
    """The operator's container image."""

    repository: str = Field(default="rillet/operator", min_length=1)
    tag: str = Field(default="", description="Defaults to the chart's appVersion.")
    pull_policy: PullPolicy = "IfNotPresent"


class Kafka(ChartModel):
    """The Kafka cluster the operator manages topics in."""

    bootstrap_servers: str = Field(
        default="kafka:9092", min_length=1, description="host:port[,host:port...]"
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = Field(
        default="", description="Empty: no SASL."
    )
    credentials_secret: str = Field(
        default="",
        description="An existing Secret with keys `username` and `password`: credentials never "
        "go in values.",
    )


class Operator(ChartModel):
    """How the operator reconciles."""

    resync_seconds: float = Field(
        default=30, gt=0, description="How often every topic is re-checked against Kafka."
    )
    prefix_namespace: bool = Field(
        default=False,
        description="Name Kafka topics <namespace>.<name> (Kafka clusters shared by teams).",
    )
    worker_limit: int = Field(default=200, ge=1, description="Objects handled at once.")
    worker_idle_seconds: float = Field(
        default=0.5,
        gt=0,
        description="How long a worker waits for more events of its object before it frees "
        "its slot.",
    )
    metrics_port: int = Field(default=8080, ge=1, le=65535, description="Prometheus metrics.")
    health_port: int = Field(default=8081, ge=1, le=65535, description="Liveness and readiness.")


class Apps(ChartModel):
    """How Apps run: every App gets a driver StatefulSet (with a checkpoint volume), a headless
    Service, a ServiceAccount + Role + RoleBinding and a ConfigMap; executors scale on lag."""

    scale_seconds: float = Field(
        default=2, gt=0, description="How often lag is read and executor counts decided."
    )
    image_pull_policy: PullPolicy = Field(
        default="IfNotPresent", description="Of driver and executor pods."
    )
    storage_class: str = Field(
        default="", description="Of the checkpoint volumes; empty: the cluster's default."
    )
    checkpoint_size: str = Field(
        default="1Gi",
        pattern=r"^[0-9]+(\.[0-9]+)?([KMGTPE]i?)?$",
        description="Size of a new App's checkpoint volume, e.g. 1Gi.",
    )
    kafka_bootstrap_servers: str = Field(
        default="", description="Kafka as driver pods reach it; empty: kafka.bootstrapServers."
    )
    apiserver_url: str = Field(
        default="", description="Spark's k8s:// master; empty: the kubernetes Service."
    )


class Resources(ChartModel):
    """The operator container's resources (a Kubernetes ResourceRequirements)."""

    requests: dict[str, str | int] = Field(default={"cpu": "100m", "memory": "256Mi"})
    limits: dict[str, str | int] = Field(default={"memory": "512Mi"})


class ServiceMonitor(ChartModel):
    """A Prometheus Operator ServiceMonitor for the metrics port."""

    enabled: bool = False


class ChartValues(ChartModel):
    """Values of the Rillet operator chart."""

    image: Image = Field(default_factory=Image)
    watch_namespaces: list[str] = Field(
        default=[], description='Namespaces to watch (globs allowed, e.g. "team-*"); empty: all.'
    )
    kafka: Kafka = Field(default_factory=Kafka)
    operator: Operator = Field(default_factory=Operator)
    apps: Apps = Field(default_factory=Apps)
    resources: Resources = Field(default_factory=Resources)
    pod_security_context: dict[str, Any] = Field(
        default={
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        description="The operator pod's securityContext (a Kubernetes PodSecurityContext).",
    )
    security_context: dict[str, Any] = Field(
        default={
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        description="The operator container's securityContext (a Kubernetes SecurityContext).",
    )
    service_monitor: ServiceMonitor = Field(default_factory=ServiceMonitor)


def values_schema() -> dict[str, Any]:
    """The JSON schema Helm checks values against."""
    schema = _without_titles(ChartValues.model_json_schema(by_alias=True))
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def _without_titles(node: Any) -> Any:
    # pydantic titles each field after its Python name ("Scaleseconds"): noise in a values schema.
    if isinstance(node, dict):
        return {k: _without_titles(v) for k, v in node.items() if k != "title"}
    if isinstance(node, list):
        return [_without_titles(item) for item in node]
    return node
