"""Operator settings, from environment variables prefixed RILLET_ (pydantic-settings).

`AppSettings` (RILLET_APP_*) shape the Kubernetes objects of every App and how often the
operator scales them. Kafka credentials are read from a Kubernetes Secret mounted as environment
(the Helm chart wires it) and held as SecretStr: they never appear in logs, status, Events or
ConfigMaps. So are the schema registry's (`SchemaRegistrySettings`, RILLET_SCHEMA_REGISTRY_*),
which reach an Avro App's driver only as the files of a Secret in its namespace.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class KafkaSettings(BaseSettings):
    """How the operator reaches Kafka."""

    model_config = SettingsConfigDict(env_prefix="RILLET_KAFKA_")

    bootstrap: str = Field(
        default="127.0.0.1:9092", description="Bootstrap servers, host:port[,host:port...]."
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    credentials_dir: Path | None = Field(
        default=None,
        description="A directory with files `username` and `password` (a mounted Secret): the "
        "SASL login when sasl_username is unset. Files, not environment variables, keep the "
        "password out of the process's environment.",
    )
    ssl_ca_location: Path | None = Field(
        default=None, description="PEM file of the CA that signed the brokers' certificates."
    )
    request_timeout_seconds: float = Field(default=15.0, gt=0)

    @model_validator(mode="after")
    def _login_from_files(self) -> KafkaSettings:
        if self.credentials_dir is not None and not self.sasl_username:
            self.sasl_username = (self.credentials_dir / "username").read_text().strip()
            self.sasl_password = SecretStr((self.credentials_dir / "password").read_text().strip())
        return self

    def client_config(self) -> dict[str, Any]:
        """librdkafka settings for an admin client (the only place the password is revealed)."""
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": self.security_protocol,
            "socket.connection.setup.timeout.ms": 5000,
            "reconnect.backoff.max.ms": 5000,
        }
        if self.ssl_ca_location is not None:
            config["ssl.ca.location"] = str(self.ssl_ca_location)
        if self.sasl_mechanism:
            config["sasl.mechanism"] = self.sasl_mechanism
            config["sasl.username"] = self.sasl_username or ""
            config["sasl.password"] = (
                self.sasl_password.get_secret_value() if self.sasl_password else ""
            )
        return config


class SchemaRegistrySettings(BaseSettings):
    """The schema registry of Avro keys and values, as driver pods reach it."""

    model_config = SettingsConfigDict(env_prefix="RILLET_SCHEMA_REGISTRY_")

    url: str | None = Field(
        default=None,
        description="Base URL of its Confluent-compatible API as driver pods reach it, e.g. "
        "http://registry:8080/apis/ccompat/v7; unset: Apps cannot use format avro.",
    )
    username: str | None = Field(default=None, description="Basic-auth user; unset: none.")
    password: SecretStr | None = Field(default=None, description="Basic-auth password.")
    request_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description="How long one request waits for the registry's answer before it is asked "
        "again: without it, a request the registry never answers waits forever.",
    )

    @model_validator(mode="after")
    def _password_with_username(self) -> SchemaRegistrySettings:
        # Caught at start: otherwise every Avro driver would fail at its first registry call.
        if self.username and self.password is None:
            raise ValueError(
                "RILLET_SCHEMA_REGISTRY_USERNAME is set without RILLET_SCHEMA_REGISTRY_PASSWORD"
            )
        return self

    def client_config(self, credentials_dir: Path | None = None) -> dict[str, Any]:
        """confluent-kafka's SchemaRegistryClient settings (the only place the password is
        revealed), with the credentials of files `username` and `password` in
        `credentials_dir` (a mounted Secret, as a Table server has) when no username is set;
        raises ValueError when no URL is set."""
        if not self.url:
            raise ValueError(
                "no schema registry: set RILLET_SCHEMA_REGISTRY_URL (`rillet dev env` exports it "
                "for the local stack)"
            )
        config: dict[str, Any] = {"url": self.url, "timeout": self.request_timeout_seconds}
        username, password = (
            self.username,
            self.password.get_secret_value() if self.password else "",
        )
        if not username and credentials_dir is not None:
            username = (credentials_dir / "username").read_text().strip()
            password = (credentials_dir / "password").read_text().strip()
        if username:
            config["basic.auth.user.info"] = f"{username}:{password}"
        return config


class OperatorSettings(BaseSettings):
    """What the operator watches and how often it re-checks Kafka."""

    model_config = SettingsConfigDict(env_prefix="RILLET_")

    namespaces: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Namespaces to watch (comma-separated); empty: all namespaces.",
    )
    resync_seconds: float = Field(
        default=30.0, gt=0, description="How often every topic is re-checked against Kafka."
    )
    prefix_namespace: bool = Field(
        default=True,
        description="Name Kafka topics <namespace>.<name>, so that no namespace can name (and "
        "so claim) another's topic on a shared Kafka; false keeps the names as written.",
    )
    release: str = Field(
        default="rillet",
        min_length=1,
        description="This installation's name in the claims recorded in Kafka (the chart sets "
        "<namespace>/<release>): releases sharing a Kafka must have different ones, and one must "
        "keep its own, or it no longer owns its topics.",
    )
    claims_topic: str = Field(
        default="__rillet_claims",
        description="The compacted Kafka topic where every release records which topics it owns.",
    )
    max_partitions_per_topic: int = Field(
        default=1000,
        ge=1,
        description="The most partitions a Topic or Table may ask for; more: QuotaExceeded.",
    )
    max_topics_per_namespace: int = Field(
        default=10_000,
        ge=1,
        description="The most Topics and Tables a namespace may have; the newest beyond it: "
        "QuotaExceeded.",
    )
    batch_max_items: int = Field(default=500, ge=1, description="Topics per batch of admin calls.")
    batch_linger_seconds: float = Field(
        default=0.05, ge=0, description="How long a batch waits to fill before it runs."
    )
    queue_size: int = Field(
        default=10_000, ge=1, description="Pending topic reconciles before new ones wait."
    )
    worker_limit: int = Field(
        default=200, ge=1, description="Objects handled at once (kopf workers)."
    )
    worker_idle_seconds: float = Field(
        default=0.5,
        gt=0,
        description="How long a kopf worker waits for more events of its object before it "
        "frees its slot for another object.",
    )
    metrics_port: int = Field(default=8080, ge=0, description="Prometheus port (0: off).")
    health_port: int = Field(default=8081, ge=0, description="Liveness probe port (0: off).")
    leader_election: bool = Field(
        default=False,
        description="Reconcile only while holding a Lease, so that replicas stand by (the chart "
        "turns it on).",
    )
    lease_name: str = Field(default="rillet-operator", description="The Lease of the replicas.")
    lease_namespace: str = Field(
        default="",
        description="The Lease's namespace; empty: the pod's own (in-cluster), else `default`.",
    )
    pod_name: str = Field(
        default_factory=socket.gethostname,
        description="This replica's identity in the Lease (the chart sets the pod's name).",
    )

    @property
    def listed_namespaces(self) -> tuple[str, ...]:
        """The watched namespaces when each is a name (no glob, no `!`), empty otherwise. The
        chart then grants the operator rights in these alone, a Role in each (no ClusterRole
        for namespaced resources), so it must make no cluster-wide request for them."""
        if any(mark in name for name in self.namespaces for mark in "*?!"):
            return ()
        return tuple(self.namespaces)

    @property
    def lease_home(self) -> str:
        """Where the Lease lives: the setting, else the namespace this pod runs in."""
        if self.lease_namespace:
            return self.lease_namespace
        if IN_CLUSTER_NAMESPACE.exists():
            return IN_CLUSTER_NAMESPACE.read_text().strip()
        return "default"

    @field_validator("namespaces", mode="before")
    @classmethod
    def _split_namespaces(cls, value: object) -> object:
        if isinstance(value, str):
            return [name.strip() for name in value.split(",") if name.strip()]
        return value


class AppSettings(BaseSettings):
    """How the operator runs Apps: their objects' environment and the scaling loop's pace."""

    model_config = SettingsConfigDict(env_prefix="RILLET_APP_")

    max_executors_per_app: int = Field(
        default=64,
        ge=1,
        description="The most executors any App runs, whatever its maxExecutors (a quota a "
        "platform team sets): the scaling reason says so when it binds.",
    )
    scale_seconds: float = Field(
        default=2.0,
        gt=0,
        description="How often every running App's lag, driver and executors are observed and "
        "its executor count decided (the driver reads it as often).",
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        default="IfNotPresent", description="imagePullPolicy of driver and executor pods."
    )
    storage_class: str | None = Field(
        default=None,
        description="StorageClass of the driver's checkpoint volume; unset: the cluster default.",
    )
    checkpoint_size: str = Field(
        default="1Gi", description="Size of the driver's checkpoint volume (a new App's)."
    )
    kafka_bootstrap: str | None = Field(
        default=None,
        description="Kafka bootstrap servers as pods reach them; unset: RILLET_KAFKA_BOOTSTRAP.",
    )
    apiserver_url: str | None = Field(
        default=None,
        description="The apiserver as driver pods reach it (Spark's k8s:// master); unset: the "
        "address the operator itself uses (in a cluster, the kubernetes Service).",
    )
    monitoring_namespace_labels: dict[str, str] = Field(
        default_factory=lambda: {"kubernetes.io/metadata.name": "monitoring"},
        description="matchLabels of the namespaces whose pods may scrape an App driver's "
        "metrics port, through the App's NetworkPolicy (JSON); empty: none may.",
    )
    driver_cluster_role: str = Field(
        default="rillet-rillet-operator-driver",
        min_length=1,
        description="The ClusterRole each App's driver is bound to in its namespace (a "
        "RoleBinding `<app>-driver-rights`): the chart's `<namespace>-rillet-operator-driver`, "
        "which it sets here; the operator may bind that one alone.",
    )
    kafka_principals: bool = Field(
        default=False,
        description="Give each App a Kafka principal of its own: a SCRAM user and exactly the "
        "ACLs its spec needs (needs the operator to log in with SCRAM as a super user).",
    )
    principal_sweep_seconds: float = Field(
        default=300.0,
        gt=0,
        description="With kafka_principals: how often the SCRAM users of Apps deleted while "
        "Kafka was unreachable are looked for and removed (and once at start-up).",
    )


class TableServerSettings(BaseSettings):
    """How the operator runs Table servers (`spec.serve`)."""

    model_config = SettingsConfigDict(env_prefix="RILLET_TABLE_SERVER_")

    image: str = Field(
        default="rillet/operator:0.1.0",
        description="Image of Table server pods: the operator's own (the chart sets it).",
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        default="IfNotPresent", description="imagePullPolicy of Table server pods."
    )
    operator_namespace: str = Field(
        default="",
        description="The operator's namespace, whose pods (operator_labels) a server's "
        "NetworkPolicy admits to lookups; empty: the pod's own namespace, in a cluster.",
    )
    operator_labels: dict[str, str] = Field(
        default_factory=dict,
        description="Labels of the operator's pods (JSON); empty: no rule for the operator.",
    )
    monitoring_namespace_labels: dict[str, str] = Field(
        default_factory=lambda: {"kubernetes.io/metadata.name": "monitoring"},
        description="matchLabels of the namespaces whose pods may scrape a server's metrics "
        "port (JSON); empty: none may.",
    )
    apiserver_cidrs: list[str] = Field(
        default_factory=list,
        description="Addresses (CIDRs, JSON list) the apiserver's proxy comes from, admitted "
        "to lookups by a server's NetworkPolicy, for `rillet table get` under a CNI that "
        "enforces NetworkPolicy.",
    )

    def own_namespace(self) -> str:
        """The operator's namespace: the setting, else the pod's own (empty outside one)."""
        if self.operator_namespace:
            return self.operator_namespace
        if IN_CLUSTER_NAMESPACE.exists():
            return IN_CLUSTER_NAMESPACE.read_text().strip()
        return ""
