"""Kafka in KRaft mode from Maven Central jars: one combined broker+controller per node.

One node by default; three (a static controller quorum) for replication-factor-3 and
broker-loss tests. Heap and cleaner buffers are sized so three JVMs fit a 2-core machine.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient

from rillet.devstack import processes
from rillet.devstack.commands import run_logged
from rillet.devstack.processes import ProcessRecord

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
) -> str:
    """server.properties of one combined-mode node of a static quorum; clients (and other
    brokers) reach it on `host`, the controllers talk on loopback."""
    replication = min(3, len(quorum))
    voters = ",".join(f"{i}@127.0.0.1:{p.controller}" for i, p in sorted(quorum.items()))
    settings = {
        "process.roles": "broker,controller",
        "node.id": node_id,
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://{host}:{ports.broker},CONTROLLER://127.0.0.1:{ports.controller}",
        "advertised.listeners": f"PLAINTEXT://{host}:{ports.broker}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
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
    records: list[ProcessRecord] = field(default_factory=list, init=False)

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
            servers.append(listeners.split(",")[0].removeprefix("PLAINTEXT://"))
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
            )
            properties += "".join(f"{k}={v}\n" for k, v in self.extra_properties.items())
            self._config(node).write_text(properties)
            run_logged(
                self._java(
                    "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", self._config(node)
                ),
                log=self.logs / f"kafka-{node}-format.log",
            )

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
        for record in records:
            processes.wait_ready(
                record,
                lambda: self._brokers_up(bootstrap) == self.brokers,
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
    def _brokers_up(bootstrap: str) -> int:
        admin = AdminClient(
            {"bootstrap.servers": bootstrap, "socket.timeout.ms": 2000, "log_level": 0}
        )
        return len(admin.list_topics(timeout=2).brokers)
