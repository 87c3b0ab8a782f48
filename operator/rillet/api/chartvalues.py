"""The values of the Helm chart (charts/rillet), as a model: the source of values.schema.json.

Helm checks every install and upgrade against the schema, so a misspelled key or a wrong type is
refused with the key's path instead of being silently ignored: every object forbids keys it does
not know. The defaults here are the chart's values.yaml (a unit test holds them equal), and each
value the operator reads maps to one of its RILLET_* settings (rillet.settings).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict

PullPolicy = Literal["Always", "IfNotPresent", "Never"]
# A namespace name, or a kopf pattern: globs (`*`, `?`) and a leading `!` that excludes.
NamespacePattern = Annotated[str, Field(pattern=r"^!?[a-z0-9*?]([-a-z0-9*?]{0,61}[a-z0-9*?])?$")]
# A Prometheus duration, as the Prometheus Operator accepts it: 30s, 1m, 1m30s.
Duration = Annotated[str, Field(pattern=r"^(0|([0-9]+(ms|s|m|h|d|w|y))+)$")]


class ChartModel(BaseModel):
    """A values object: camelCase keys as written in values.yaml, unknown keys refused."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class Image(ChartModel):
    """The operator's container image."""

    repository: str = Field(default="rillet/operator", min_length=1, description="Without tag.")
    tag: str = Field(default="", description="Defaults to the chart's appVersion.")
    pull_policy: PullPolicy = Field(default="IfNotPresent", description="Of the operator pod.")


class Kafka(ChartModel):
    """The Kafka cluster the operator manages topics in."""

    bootstrap_servers: str = Field(
        default="kafka:9092", min_length=1, description="host:port[,host:port...]"
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        default="PLAINTEXT", description="How the operator connects to the brokers."
    )
    sasl_mechanism: Literal["", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = Field(
        default="", description="Empty: no SASL."
    )
    credentials_secret: str = Field(
        default="",
        description="An existing Secret with keys `username` and `password`: credentials never "
        "go in values.",
    )
    ca_secret: str = Field(
        default="",
        description="An existing Secret with key `ca.crt`: the CA that signed the brokers' "
        "certificates (SSL, SASL_SSL). Empty: the image's system CAs.",
    )
    request_timeout_seconds: float = Field(
        default=15, gt=0, description="How long one admin request to Kafka may take."
    )
    app_principals: bool = Field(
        default=False,
        description="Give each App a Kafka principal of its own: a SCRAM user (its password in "
        "Secret `<app>-kafka`) allowed exactly the topics its spec reads and writes. Needs "
        "SASL_SSL (or SASL_PLAINTEXT) with SCRAM and the operator's user a super user. Off: "
        "Apps connect without credentials (ACLs managed elsewhere).",
    )
    app_principal_sweep_seconds: float = Field(
        default=300,
        gt=0,
        description="With appPrincipals: how often the operator removes the SCRAM users (and "
        "ACLs) of Apps deleted while Kafka was unreachable: users of this cluster's id, of a "
        "watched namespace, whose App is gone.",
    )


class SchemaRegistry(ChartModel):
    """The schema registry of Avro keys and values: Confluent's REST API (Confluent Schema
    Registry, or another registry's compatible API such as Apicurio Registry's ccompat)."""

    url: str = Field(
        default="",
        description="Its base URL as driver and Table server pods reach it, e.g. "
        "http://registry.kafka:8080/apis/ccompat/v7. Empty: Apps cannot use format avro "
        "(InvalidSpec), nor can avro Tables be served (NoSchemaRegistry).",
    )
    existing_secret: str = Field(
        default="",
        description="An existing Secret in the release's namespace with keys `username` and "
        "`password` (basic auth); empty: no credentials. The operator copies them into a Secret "
        "`<app>-schema-registry` of each App that uses Avro, mounted by its driver alone, and "
        "`<table>-server-schema-registry` of each served avro Table, mounted by its server: "
        "credentials never go in values.",
    )
    request_timeout_seconds: float = Field(
        default=10,
        gt=0,
        description="How long one request of a driver to the registry waits for its answer "
        "before it is asked again.",
    )


class Operator(ChartModel):
    """How the operator reconciles."""

    resync_seconds: float = Field(
        default=30, gt=0, description="How often every topic is re-checked against Kafka."
    )
    prefix_namespace: bool = Field(
        default=True,
        description="Name Kafka topics `<namespace>.<name>`, so that no namespace can name "
        "another's topic on a shared Kafka; `false` keeps the names as written "
        "(docs/upgrading.md).",
    )
    release_id: str = Field(
        default="",
        description="This installation's name in the topic claims recorded in Kafka (docs/"
        "upgrading.md); empty: `<release namespace>/<release name>`. Installations sharing a "
        "Kafka, in one cluster or several, need different ones; keep it once set.",
    )
    claims_topic: str = Field(
        default="__rillet_claims",
        description="The compacted Kafka topic where every installation records the topics it "
        "owns: the same for all installations sharing a Kafka.",
    )
    max_partitions_per_topic: int = Field(
        default=1000,
        ge=1,
        description="The most partitions a Topic or Table may ask for (a tenant's topic cannot "
        "take the brokers down); more: the object is Stalled, QuotaExceeded.",
    )
    max_topics_per_namespace: int = Field(
        default=10_000,
        ge=1,
        description="The most Topics and Tables one namespace may have; the newest beyond it "
        "are Stalled, QuotaExceeded.",
    )
    worker_limit: int = Field(default=200, ge=1, description="Objects handled at once.")
    worker_idle_seconds: float = Field(
        default=0.5,
        gt=0,
        description="How long a worker waits for more events of its object before it frees "
        "its slot.",
    )
    batch_max_items: int = Field(
        default=500, ge=1, description="Topics per batch of admin calls to Kafka."
    )
    batch_linger_seconds: float = Field(
        default=0.05, ge=0, description="How long a batch waits to fill before it runs."
    )
    queue_size: int = Field(
        default=10000, ge=1, description="Pending topic reconciles before new ones wait."
    )
    metrics_port: int = Field(default=8080, ge=1, le=65535, description="Prometheus metrics.")
    health_port: int = Field(default=8081, ge=1, le=65535, description="Liveness and readiness.")


class Apps(ChartModel):
    """How Apps run: every App gets a driver StatefulSet (with a checkpoint volume), a headless
    Service, a ServiceAccount bound to the chart's driver ClusterRole (a RoleBinding), a
    ConfigMap, a NetworkPolicy and a Secret (the key of its Spark traffic); executors scale on
    lag."""

    scale_seconds: float = Field(
        default=2, gt=0, description="How often lag is read and executor counts decided."
    )
    max_executors_per_app: int = Field(
        default=64,
        ge=1,
        description="The most executors any App runs, whatever its maxExecutors; the scaling "
        "reason says CappedByQuota when it binds.",
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
    monitoring_namespace_labels: dict[str, str] = Field(
        default={"kubernetes.io/metadata.name": "monitoring"},
        description="matchLabels of the namespaces whose pods may scrape a driver's metrics "
        "port; {}: none may. Only the App's own pods reach its Spark ports (its NetworkPolicy).",
    )


class Resources(ChartModel):
    """The operator container's resources (a Kubernetes ResourceRequirements)."""

    requests: dict[str, str | int] = Field(
        default={"cpu": "100m", "memory": "256Mi"}, description="What the scheduler reserves."
    )
    limits: dict[str, str | int] = Field(
        default={"memory": "512Mi"},
        description="What the container may use at most.",
    )


class PodDisruptionBudget(ChartModel):
    """A PodDisruptionBudget for the operator pod."""

    enabled: bool = Field(
        default=False,
        description="maxUnavailable 1: a drain evicts one replica at a time, so with two a "
        "standby is left to take the Lease, and with one it never blocks a drain (minAvailable "
        "1 would block every drain forever). Off by default; for clusters whose policy wants a "
        "budget on every workload.",
    )


class Monitor(ChartModel):
    """A Prometheus Operator object scraping the operator's metrics port (operator.metricsPort).
    Needs the monitoring.coreos.com CRDs; enable one of the two, not both (the operator would
    be scraped twice)."""

    enabled: bool = Field(default=False, description="Render it.")
    interval: Duration = Field(default="30s", description="How often Prometheus scrapes.")
    labels: dict[str, str] = Field(
        default={},
        description="Extra labels, e.g. the one your Prometheus's monitor selector matches.",
    )


class GrafanaDashboard(ChartModel):
    """Rillet's Grafana dashboard (the chart's dashboards/rillet.json: reconciles, Kafka admin
    batches and resyncs of the operator; lag, rows and micro-batches of the Apps' drivers) as a
    ConfigMap that Grafana's dashboard sidecar loads. The App panels need the drivers scraped
    too (port `metrics` of the pods labelled rillet.io/role=driver)."""

    enabled: bool = Field(default=False, description="Render the ConfigMap.")
    labels: dict[str, str] = Field(
        default={"grafana_dashboard": "1"},
        description="Labels of the ConfigMap: the one the sidecar looks for (its `label` and "
        "`labelValue` settings), and any other.",
    )
    annotations: dict[str, str] = Field(
        default={},
        description="Annotations of the ConfigMap, e.g. the sidecar's folder annotation "
        "(its `folderAnnotation` setting) to file the dashboard in a Grafana folder.",
    )
    namespace: str = Field(
        default="",
        pattern=r"^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)?$",
        description="Where the ConfigMap goes, e.g. Grafana's namespace when the sidecar "
        "watches only that one; empty: the release's namespace.",
    )


class Monitoring(ChartModel):
    """Prometheus Operator objects for the operator's metrics (rillet_*), and a Grafana
    dashboard."""

    service_monitor: Monitor = Field(
        default_factory=Monitor, description="A ServiceMonitor selecting the metrics Service."
    )
    pod_monitor: Monitor = Field(
        default_factory=Monitor, description="A PodMonitor selecting the operator pod."
    )
    grafana_dashboard: GrafanaDashboard = Field(default_factory=GrafanaDashboard)


class TableServers(ChartModel):
    """Table servers (a Table's `spec.serve`): who their NetworkPolicy admits."""

    monitoring_namespace_labels: dict[str, str] = Field(
        default={"kubernetes.io/metadata.name": "monitoring"},
        description="matchLabels of the namespaces whose pods may scrape a server's metrics "
        "port; {}: none may. Lookups are admitted from the Table's namespace and the operator.",
    )
    apiserver_cidrs: list[str] = Field(
        default=[],
        description="Addresses (CIDRs) the apiserver's proxy comes from, admitted to lookups: "
        "`rillet table get` goes through it, and a CNI that enforces NetworkPolicy sees it as "
        "an address outside every namespace (the control plane's nodes, say).",
    )


WATCH_CONFLICT = "watchAnyNamespace watches every namespace: leave watchNamespaces empty with it"
# Helm checks the schema before it renders anything, so the schema is where the two watch values
# that contradict each other are refused: with namespaces listed, Helm answers "at
# '/watchAnyNamespace': value must be false" (the chart's template fails too, for an install
# that skips the schema).
WATCH_ANY_NAMESPACE_ALONE: JsonDict = {
    "if": {"properties": {"watchNamespaces": {"minItems": 1}}},
    "then": {"properties": {"watchAnyNamespace": {"const": False}}},
}


class ChartValues(ChartModel):
    """Values of the Rillet operator chart."""

    model_config = ConfigDict(json_schema_extra=WATCH_ANY_NAMESPACE_ALONE)

    image: Image = Field(default_factory=Image)
    replicas: int = Field(
        default=2,
        ge=1,
        le=5,
        description="Operator pods. One holds a Lease and reconciles; the others stand by and "
        "take over within 15 s when it dies (a second when it stops cleanly).",
    )
    watch_namespaces: list[NamespacePattern] = Field(
        default=[],
        description="Namespaces to watch; empty: the release's namespace alone. Names alone "
        '(no glob such as "team-*", no `!`): the operator gets a Role in each of them and, '
        "cluster-wide, only reads namespaces, CRDs and nodes; each must exist. With a glob it "
        "is granted a ClusterRole, as with watchAnyNamespace (a glob matches namespaces made "
        "later).",
    )
    watch_any_namespace: bool = Field(
        default=False,
        description="Watch every namespace, with one ClusterRole holding the operator's rights "
        "in all of them. Refused together with watchNamespaces (which would say otherwise).",
    )
    driver_pod_policy: bool = Field(
        default=True,
        description="A ValidatingAdmissionPolicy that holds each App driver's requests on pods "
        "to its own App's executors: no other pod, no ServiceAccount token, no host path or "
        "host namespace, nothing privileged (docs/security-model.md).",
    )
    operator_secret_policy: bool = Field(
        default=True,
        description="A ValidatingAdmissionPolicy that holds the operator's own writes of Secrets "
        "(create, update, delete) to those it makes: named <name>-kafka, -spark-auth or "
        "-schema-registry and labelled app.kubernetes.io/managed-by=rillet (RBAC cannot limit "
        "a create or a patch by name). It holds its reads too: the operator has no get on "
        "Secrets and reads its own back by a patch that changes nothing; off, that patch "
        "could read any Secret of the watched namespaces (docs/security-model.md).",
    )
    kafka: Kafka = Field(default_factory=Kafka)
    schema_registry: SchemaRegistry = Field(default_factory=SchemaRegistry)
    operator: Operator = Field(default_factory=Operator)
    apps: Apps = Field(default_factory=Apps)
    table_servers: TableServers = Field(default_factory=TableServers)
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
    node_selector: dict[str, str] = Field(
        default={}, description="Labels a node must have to run an operator pod."
    )
    tolerations: list[dict[str, Any]] = Field(
        default=[], description="Taints the operator pods tolerate (Kubernetes Tolerations)."
    )
    affinity: dict[str, Any] = Field(
        default={},
        description="The operator pods' affinity (a Kubernetes Affinity): for instance a "
        "podAntiAffinity that keeps the replicas on different nodes, so one node lost leaves a "
        "standby.",
    )
    pod_disruption_budget: PodDisruptionBudget = Field(default_factory=PodDisruptionBudget)
    monitoring: Monitoring = Field(default_factory=Monitoring)

    @model_validator(mode="after")
    def _watch_any_namespace_alone(self) -> ChartValues:
        if self.watch_any_namespace and self.watch_namespaces:
            raise ValueError(WATCH_CONFLICT)
        return self


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
