"""Kafka in KRaft mode from Maven Central jars: one combined broker+controller per node.

One node by default; three (a static controller quorum) for replication-factor-3 and
broker-loss tests. Heap and cleaner buffers are sized so three JVMs fit a 2-core machine.

PLAINTEXT by default. With `KafkaSecurity` clients and brokers talk SASL_SSL: TLS with a
certificate from the stack's CA, SCRAM-SHA-512 users (the admin's written at format time, so
it exists before the first start), and the StandardAuthorizer with
allow.everyone.if.no.acl.found=false, so a user may do only what its ACLs allow. The controller
listener stays PLAINTEXT on loopback: KRaft controllers cannot check SCRAM credentials (they
live in the metadata the controllers serve), so its ANONYMOUS principal is a super user. Any
process of the machine can reach loopback, so this is a development stack's trade-off: a
production cluster puts mTLS on the controller listener.
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import signal
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from cryptography.hazmat.primitives import serialization

from rillet_devstack import pki, processes
from rillet_devstack.commands import run_logged
from rillet_devstack.processes import ProcessRecord

LOG4J2_PROPERTIES = """\
status = warn
appender.file.type = Console
appender.file.name = STDOUT
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
logger.apache.name = org.apache.kafka
logger.apache.level = WARN
"""

JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")


SCRAM_MECHANISM = "SCRAM-SHA-512"


@dataclass(frozen=True)
class KafkaSecurity:
    """SASL_SSL with SCRAM-SHA-512 and ACLs: the files and the admin's credentials."""

    ca_cert: Path  # PEM: what clients trust
    keystore: Path  # PEM: the brokers' private key (PKCS#8) and certificate
    admin_user: str
    admin_password: str = field(repr=False)

    def server_properties(self) -> dict[str, str]:
        """The broker settings of the SASL_SSL listener and the authorizer."""
        login = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{self.admin_user}" password="{self.admin_password}";'
        )
        return {
            "sasl.enabled.mechanisms": SCRAM_MECHANISM,
            "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": login,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_cert),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": f"User:{self.admin_user};User:ANONYMOUS",
        }

    def operator_environment(self) -> dict[str, str]:
        """The operator's settings for this security, as the chart sets them from its values
        and Secrets (admin login as files, as the chart mounts its Secret; CA; each App its own
        principal)."""
        login = self.ca_cert.parent / "operator-login"
        login.mkdir(mode=0o700, exist_ok=True)
        for name, value in (("username", self.admin_user), ("password", self.admin_password)):
            path = login / name
            path.touch(mode=0o600, exist_ok=True)
            path.write_text(value, encoding="utf-8")
        return {
            "RILLET_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "RILLET_KAFKA_SASL_MECHANISM": SCRAM_MECHANISM,
            "RILLET_KAFKA_CREDENTIALS_DIR": str(login),
            "RILLET_KAFKA_SSL_CA_LOCATION": str(self.ca_cert),
            "RILLET_APP_KAFKA_PRINCIPALS": "true",
        }

    def client_config(self, *, user: str | None = None, password: str = "") -> dict[str, Any]:
        """librdkafka settings of a client: the admin's, or `user`'s with `password`."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": SCRAM_MECHANISM,
            "sasl.username": user or self.admin_user,
            "sasl.password": password if user else self.admin_password,
            "ssl.ca.location": str(self.ca_cert),
        }


def secure(control_plane_pki: pki.ControlPlanePki, *, host: str) -> KafkaSecurity:
    """SASL_SSL for a cluster reached on `host`: a serving certificate from the stack's CA (its
    key as PKCS#8, the PEM form Kafka reads) and a fresh admin password, kept with the PKI."""
    issued = pki.issue(
        control_plane_pki,
        name="kafka",
        common_name="kafka",
        ips=tuple(dict.fromkeys((host, "127.0.0.1"))),
        dns_names=("localhost",),
    )
    key = serialization.load_pem_private_key(issued.key.read_bytes(), password=None)
    keystore = control_plane_pki.directory / "kafka-keystore.pem"
    private_key = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    pki.write_private(keystore, private_key + issued.cert.read_bytes())
    return KafkaSecurity(
        ca_cert=control_plane_pki.ca_cert,
        keystore=keystore,
        admin_user="admin",
        admin_password=secrets.token_urlsafe(24),
    )


@dataclass(frozen=True)
class NodePorts:
    """The two listeners of one KRaft node."""

    broker: int
    controller: int


def build_server_properties(
    *,
    node_id: int,
    ports: NodePorts,
    quorum: dict[int, NodePorts],
    log_dir: Path,
    host: str = "127.0.0.1",
    security: KafkaSecurity | None = None,
) -> str:
    """server.properties of one combined-mode node of a static quorum; clients (and other
    brokers) reach it on `host`, the controllers talk on loopback."""
    replication = min(3, len(quorum))
    voters = ",".join(f"{i}@127.0.0.1:{p.controller}" for i, p in sorted(quorum.items()))
    listener = "SASL_SSL" if security else "PLAINTEXT"
    settings: dict[str, object] = {
        "process.roles": "broker,controller",
        "node.id": node_id,
        "controller.quorum.voters": voters,
        "listeners": f"{listener}://{host}:{ports.broker},CONTROLLER://127.0.0.1:{ports.controller}",
        "advertised.listeners": f"{listener}://{host}:{ports.broker}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": listener,
        "listener.security.protocol.map": f"{listener}:{listener},CONTROLLER:PLAINTEXT",
        "log.dirs": log_dir,
        "num.partitions": 1,
        "default.replication.factor": 1,
        "offsets.topic.replication.factor": replication,
        "transaction.state.log.replication.factor": replication,
        "transaction.state.log.min.isr": 1,
        "share.coordinator.state.topic.replication.factor": replication,
        "share.coordinator.state.topic.min.isr": 1,
        "offsets.topic.num.partitions": 10,
        "group.initial.rebalance.delay.ms": 0,
        "log.cleaner.dedupe.buffer.size": 8 * 1024 * 1024,
        # Compaction visible within seconds, so tests of compacted Tables need not wait minutes.
        "log.cleaner.backoff.ms": 1000,
        "auto.create.topics.enable": "false",
        "delete.topic.enable": "true",
        **(security.server_properties() if security else {}),
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


@dataclass
class KafkaCluster:
    """A KRaft cluster of `brokers` nodes whose files live under `root`."""

    libs: Path
    root: Path
    brokers: int = 1
    heap: str = "512m"
    # The address clients use: the node address when pods must reach Kafka.
    host: str = "127.0.0.1"
    extra_properties: dict[str, str] = field(default_factory=dict)
    security: KafkaSecurity | None = None
    records: list[ProcessRecord] = field(default_factory=list, init=False)

    def client_config(self) -> dict[str, Any]:
        """librdkafka settings of an admin client of this cluster (bootstrap included)."""
        secured = self.security.client_config() if self.security else {}
        return {"bootstrap.servers": self._bootstrap(), **secured}

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def _classpath(self) -> str:
        return f"{self.libs}/*"

    def _java(self, main: str, *args: str | Path, heap: str = "256m") -> list[str | Path]:
        return [
            "java",
            f"-Xmx{heap}",
            *JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={self.root / 'log4j2.properties'}",
            "-cp",
            self._classpath(),
            main,
            *args,
        ]

    def _config(self, node: int) -> Path:
        return self.root / f"node-{node}.properties"

    def stop(self) -> None:
        """Stop every node; `start` brings them back on the same ports with the same data."""
        for record in self.records:
            processes.stop(record)
        self.records = []

    def kill(self, node: int) -> None:
        """SIGKILL one node (1-based) as a crashed machine would: no shutdown, no handover."""
        record = self.records[node - 1]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(record.pid, signal.SIGKILL)
        processes.stop(record)  # waits until it is gone

    def kill_all(self) -> None:
        """SIGKILL every node, for a cluster thrown away with its data: stopping nodes one by
        one waits out the grace period of each once the controller quorum is gone (some 15 s
        each)."""
        for node in range(1, len(self.records) + 1):
            self.kill(node)
        self.records = []

    def revive(self, node: int) -> None:
        """Start a killed node again on its ports, with its data (it catches up as a follower)."""
        self.records[node - 1] = processes.start(
            f"kafka-{node}",
            self._java("kafka.Kafka", self._config(node), heap=self.heap),
            log=self.logs / f"kafka-{node}.log",
        )

    @property
    def bootstrap(self) -> str:
        """Bootstrap servers of the cluster (known once formatted)."""
        return self._bootstrap()

    def _bootstrap(self) -> str:
        servers = []
        for node in range(1, self.brokers + 1):
            listeners = dict(
                line.split("=", 1) for line in self._config(node).read_text().splitlines()
            )["listeners"]
            servers.append(listeners.split(",")[0].split("://", 1)[1])
        return ",".join(servers)

    def format(self) -> None:
        """Write each node's config on free ports and format its storage (once)."""
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
        quorum = {
            node: NodePorts(processes.free_port(), processes.free_port())
            for node in range(1, self.brokers + 1)
        }
        cluster_id = self._random_cluster_id()
        for node, ports in quorum.items():
            properties = build_server_properties(
                node_id=node,
                ports=ports,
                quorum=quorum,
                log_dir=self.root / f"data-{node}",
                host=self.host,
                security=self.security,
            )
            properties += "".join(f"{k}={v}\n" for k, v in self.extra_properties.items())
            pki.write_private(self._config(node), properties.encode())  # the admin's password
            run_logged(
                self._java(
                    "kafka.tools.StorageTool",
                    "format",
                    "-t",
                    cluster_id,
                    "-c",
                    self._config(node),
                    *self._scram_users(),
                ),
                log=self.logs / f"kafka-{node}-format.log",
                secrets=[self.security.admin_password] if self.security else [],
            )

    def _scram_users(self) -> list[str]:
        """StorageTool arguments that create the admin's SCRAM credential with the cluster."""
        if self.security is None:
            return []
        user, password = self.security.admin_user, self.security.admin_password
        return ["--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]"]

    def start(self) -> tuple[list[ProcessRecord], str]:
        """Start every node (formatting first if never formatted); wait until all serve.

        A restart keeps the ports and data of the first start, as a restarted broker would.
        """
        if not self._config(1).exists():
            self.format()
        records = [
            processes.start(
                f"kafka-{node}",
                self._java("kafka.Kafka", self._config(node), heap=self.heap),
                log=self.logs / f"kafka-{node}.log",
            )
            for node in range(1, self.brokers + 1)
        ]
        self.records = records
        bootstrap = self._bootstrap()
        client = self.client_config()
        for record in records:
            processes.wait_ready(
                record,
                lambda: self._brokers_up(client) == self.brokers,
                timeout=120,
                what=f"serving with {self.brokers} broker(s)",
            )
        return records, bootstrap

    @staticmethod
    def _random_cluster_id() -> str:
        # Kafka's Uuid.randomUuid(): URL-safe base64 of 16 random bytes, never starting with "-".
        while True:
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
            if not cluster_id.startswith("-"):
                return cluster_id

    @staticmethod
    def _brokers_up(client: dict[str, Any]) -> int:
        admin = AdminClient({**client, "socket.timeout.ms": 2000, "log_level": 0})
        return len(admin.list_topics(timeout=2).brokers)
