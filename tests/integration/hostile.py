"""Hostile Topic, Table and App manifests from a seeded generator (the fuzzing test's data).

Each manifest starts as a valid object and takes one to three mutations: numbers at and past
the integer widths (int32, int64, the Kafka client's 100,000 partitions), zero and negative
counts, wrong JSON types, odd strings (empty, unicode, control characters, a NUL, 5,000 digits,
"1e99999999"), missing required fields, unknown fields, unknown config keys. The same seed gives
the same manifests on every run.

What the shared stack could not take if it were accepted stays out: Kafka names all start with
the test's prefix; a partition count is either 1 to 3 or beyond what the client sends (Kafka
is never asked for thousands of partitions); configs that preallocate disk (preallocate,
segment.bytes, segment.index.bytes) are not set; and no App ever runs a driver: an App either
names Topics and Tables that never exist (it waits for them) or, with `anchors`, is suspended.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from . import objects

Manifest = dict[str, Any]

# Numbers at and past the widths that matter: int32, the Kafka client's partition limit, JSON's
# exact integers (2**53), int64, and beyond.
HUGE = (2**31 - 1, 2**31, 2**32 + 1, 100_001, 2**53 + 1, 2**63 - 1, 2**63, 10**20, 10**30)
NEGATIVE = (0, -1, -(2**31), -(2**31) - 1, -(2**63), -(2**63) - 1)
ODD_STRINGS = (
    "",
    " ",
    "3",
    "-1",
    "0x10",
    "1e99999999",
    "9" * 5000,
    "ü",
    "💥 topic",
    "a\u0000b",
    "\u202eevil",
    "line\nbreak",
    "DROP TABLE x; --",
    "${HOME}",
    "x" * 300,
    "true",
    "null",
)
# Numbers as strings no Kafka setting can hold, though integer and decimal patterns take them.
NUMERIC_STRINGS = ("9" * 5000, "-" + "9" * 8000, "1e99999999", "1e-99999999", "0" * 30 + "1")
WRONG_TYPES: tuple[Any, ...] = (None, True, False, 1.5, -0.0, 1e300, [], {}, [1, 2], {"a": 1})
DURATIONS = ("0s", "1ms", "90s", "5m", "1h30m", "2562047h", "2562048h", "99999999999h", "1d")
# Topic configs whose accepted values cost the broker nothing (preallocation is left out).
CONFIG_KEYS = (
    "cleanup.policy",
    "compression.type",
    "compression.zstd.level",
    "delete.retention.ms",
    "flush.messages",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.insync.replicas",
    "remote.storage.enable",
    "retention.bytes",
    "retention.ms",
    "segment.ms",
    "unclean.leader.election.enable",
    "leader.replication.throttled.replicas",
)
UNKNOWN_CONFIG_KEYS = ("log.retention.ms", "retention.hours", "ü", "", "x" * 300)


class Generator:
    """Hostile manifests for one namespace, Kafka names under `prefix`, from `rng`."""

    def __init__(self, rng: random.Random, *, namespace: str, prefix: str) -> None:
        self.rng = rng
        self.namespace = namespace
        self.prefix = prefix
        self.count = 0

    # --- values

    def anything(self) -> Any:
        """A value of any JSON type, mostly wrong for any field."""
        pool = self.rng.choice((HUGE, NEGATIVE, ODD_STRINGS, WRONG_TYPES))
        return self.rng.choice(pool)

    def count_value(self, valid: Sequence[int]) -> Any:
        """A value for a count field: valid, huge, negative, or of another type."""
        roll = self.rng.random()
        if roll < 0.5:
            return self.rng.choice(valid)
        if roll < 0.8:
            return self.rng.choice(HUGE)
        if roll < 0.9:
            return self.rng.choice(NEGATIVE)
        return self.anything()

    def odd_text(self) -> Any:
        return self.rng.choice(ODD_STRINGS) if self.rng.random() < 0.8 else self.anything()

    def kafka_name(self) -> Any:
        """A topicName: under the prefix (odd or not), or one the CRD refuses."""
        if self.rng.random() < 0.8:
            suffix = self.rng.choice(("-n", ".dots", "_under", "--", " space", "ü", "x" * 250))
            return f"{self.prefix}{suffix}{self.count}"
        return self.rng.choice((".", "..", "", "a b", "ü", 7, None, ["x"]))

    def config(self) -> Any:
        if self.rng.random() < 0.1:
            return self.anything()
        config: dict[str, Any] = {}
        for _ in range(self.rng.choices((1, 2, 3), weights=(5, 3, 2))[0]):
            unknown = self.rng.random() < 0.1
            key = self.rng.choice(UNKNOWN_CONFIG_KEYS if unknown else CONFIG_KEYS)
            config[key] = self.config_value(key)
        return config

    def config_value(self, key: str) -> Any:
        roll = self.rng.random()
        if roll < 0.4:
            sensible: dict[str, tuple[Any, ...]] = {
                "cleanup.policy": ("compact", "delete", "compact,delete", "delete, compact"),
                "compression.type": ("zstd", "lz4", "brotli"),
                "message.timestamp.type": ("CreateTime", "LogAppendTime", "createtime"),
                "min.cleanable.dirty.ratio": ("0.5", ".5", "1e-3", "1e99999999", "2", 1),
                "remote.storage.enable": ("true", "false", "True"),
                "unclean.leader.election.enable": ("true", "false"),
                "leader.replication.throttled.replicas": ("*", "0:0", "ü", ""),
            }
            return self.rng.choice(sensible.get(key, (1, 1000, "60000", 604800000, -1)))
        if roll < 0.6:
            return self.rng.choice(HUGE + NEGATIVE)
        if roll < 0.75:
            return str(self.rng.choice(HUGE + NEGATIVE))
        if roll < 0.9:
            return self.rng.choice(NUMERIC_STRINGS)
        return self.odd_text()

    # --- manifests

    def manifests(self, total: int, *, anchors: Sequence[str]) -> Iterator[Manifest]:
        """`total` manifests: Topics, Tables and Apps, each mutated; a third of the Apps use
        the `anchors` (a Topic and a Table that exist), suspended."""
        for _ in range(total):
            self.count += 1
            kind = self.rng.choices(("Topic", "Table", "App"), weights=(45, 30, 25))[0]
            if kind == "Topic":
                yield self.topic()
            elif kind == "Table":
                yield self.table()
            else:
                yield self.app(anchors=anchors if self.rng.random() < 0.3 else ())

    def _mutated(
        self,
        manifest: Manifest,
        mutations: Sequence[Callable[[Manifest], None]],
        *,
        required: str,
    ) -> Manifest:
        """One to three values changed; one object in five malformed as well."""
        how_many = self.rng.choices((1, 2, 3), weights=(6, 3, 1))[0]
        for mutate in self.rng.sample(list(mutations), k=how_many):
            mutate(manifest)
        if self.rng.random() < 0.2:
            self.rng.choice(self._malformations(required))(manifest)
        return manifest

    def _name(self, letter: str) -> str:
        return f"{self.prefix}-{letter}{self.count}"

    def topic(self) -> Manifest:
        manifest = objects.topic(self._name("t"), self.namespace, partitions=1)
        mutations = (*self._topic_mutations(), *self._meta_mutations())
        return self._mutated(manifest, mutations, required="partitions")

    def table(self) -> Manifest:
        manifest = objects.table(self._name("b"), self.namespace, partitions=1)
        mutations = (*self._topic_mutations(), *self._table_mutations(), *self._meta_mutations())
        return self._mutated(manifest, mutations, required="valueSchema")

    def app(self, *, anchors: Sequence[str] = ()) -> Manifest:
        """An App reading and writing objects that never exist; with `anchors` (a Topic, a Table
        that exist), an App reading and writing those, suspended (it never runs a driver)."""
        if anchors:
            manifest = objects.app(
                self._name("a"), self.namespace, reads=anchors[0], writes=anchors[1]
            )
            mutations: Sequence[Callable[[Manifest], None]] = self._resource_mutations()
        else:
            manifest = objects.app(
                self._name("a"),
                self.namespace,
                reads=self._name("missing"),
                writes=self._name("missing"),
            )
            mutations = (
                *self._app_mutations(),
                *self._resource_mutations(),
                *self._meta_mutations(),
            )
        manifest = self._mutated(manifest, mutations, required="image")
        if anchors and isinstance(manifest.get("spec"), dict):
            manifest["spec"]["suspend"] = True
        return manifest

    # --- mutations: each changes a manifest in place

    def _set(self, *path: str, value: Callable[[], Any]) -> Callable[[Manifest], None]:
        def mutate(manifest: Manifest) -> None:
            node = manifest
            for key in path[:-1]:
                if not isinstance(node.get(key), dict):
                    node[key] = {}
                node = node[key]
            node[path[-1]] = value()

        return mutate

    def _drop(self, *path: str) -> Callable[[Manifest], None]:
        def mutate(manifest: Manifest) -> None:
            node: Any = manifest
            for key in path[:-1]:
                node = node.get(key) if isinstance(node, dict) else None
            if isinstance(node, dict):
                node.pop(path[-1], None)

        return mutate

    def _topic_mutations(self) -> tuple[Callable[[Manifest], None], ...]:
        return (
            self._set("spec", "partitions", value=lambda: self.count_value((1, 2, 3))),
            self._set("spec", "replicationFactor", value=lambda: self.count_value((1, 2, 10_001))),
            self._set("spec", "config", value=self.config),
            self._set("spec", "topicName", value=self.kafka_name),
            self._set(
                "spec",
                "deletionPolicy",
                value=lambda: self.rng.choice(("Retain", "Delete", "Delete", "Orphan", 1)),
            ),
        )

    def _table_mutations(self) -> tuple[Callable[[Manifest], None], ...]:
        def window() -> Any:
            if self.rng.random() < 0.1:
                return self.anything()
            found = {"type": self.rng.choice(("tumbling", "hopping", "sliding", 1))}
            for key in ("size", "step", "expiry"):
                if self.rng.random() < 0.6:
                    found[key] = self.rng.choice((*DURATIONS, "", "5 m", "-5m", 5))
            return found

        formats = ("json", "string", "bytes", "avro", 1)
        return (
            self._set("spec", "keyFormat", value=lambda: self.rng.choice(formats)),
            self._set("spec", "valueFormat", value=lambda: self.rng.choice(formats)),
            self._set("spec", "valueSchema", value=self.odd_text),
            self._set("spec", "keySchema", value=self.odd_text),
            self._set("spec", "window", value=window),
            self._set("spec", "global", value=lambda: self.rng.choice((True, "yes", 1, None))),
            self._drop("spec", "partitions"),
        )

    def _app_mutations(self) -> tuple[Callable[[Manifest], None], ...]:
        missing = self._name("missing")

        def an_input() -> Any:
            found: dict[str, Any] = {"name": self.rng.choice(("src", "ü", "1x", "", "a-b"))}
            ref = self.rng.choice(("topicRef", "tableRef", "external"))
            if ref == "external":
                found[ref] = {"topicName": self.kafka_name()}
                found["topicRef"] = {"name": missing}  # never resolvable, so it never runs
            else:
                found[ref] = {"name": self.rng.choice((missing, "ü", "", "UPPER"))}
            if self.rng.random() < 0.5:
                found["format"] = self.rng.choice(("json", "string", "bytes", "avro"))
            if self.rng.random() < 0.5:
                found["schema"] = self.odd_text()
            if self.rng.random() < 0.3:
                found["startingOffsets"] = self.rng.choice(("earliest", "latest", "beginning"))
            return found

        def an_output() -> Any:
            found: dict[str, Any] = {self.rng.choice(("topicRef", "tableRef")): {"name": missing}}
            if self.rng.random() < 0.5:
                found["keyColumns"] = self.rng.choice((["word"], [], [""], ["ü"] * 40, "word"))
            if self.rng.random() < 0.3:
                found["mode"] = self.rng.choice(("append", "upsert", "merge"))
            return found

        return (
            self._set("spec", "image", value=self.odd_text),
            self._set(
                "spec", "inputs", value=lambda: [an_input() for _ in range(self.rng.randint(0, 3))]
            ),
            self._set(
                "spec",
                "outputs",
                value=lambda: [an_output() for _ in range(self.rng.randint(0, 2))],
            ),
            self._set("spec", "pipeline", "sql", value=self.odd_text),
            self._set(
                "spec",
                "pipeline",
                value=lambda: {
                    "python": {"entrypoint": self.rng.choice(("a.b:c", "a:b:c", "ü:x"))}
                },
            ),
            self._set("spec", "suspend", value=lambda: self.rng.choice((True, "yes", 1, None))),
            self._set(
                "spec",
                "deadLetterTopic",
                value=lambda: self.rng.choice(
                    ({"topicName": self.kafka_name()}, {"topicRef": {"name": missing}}, {})
                ),
            ),
        )

    def _resource_mutations(self) -> tuple[Callable[[Manifest], None], ...]:
        quantities = (
            *HUGE,
            *NEGATIVE,
            "500m",
            "1e3",
            "1.5Gi",
            "99999999999999999999Ei",
            "-1",
            "1Ki",
        )

        def quantity() -> Any:
            return self.rng.choice(quantities) if self.rng.random() < 0.8 else self.odd_text()

        def spark_conf() -> Any:
            key = self.rng.choice(("spark.master", "spark.sql.shuffle.partitions", "ü", ""))
            return {key: self.rng.choice(("9" * 5000, "local", "ü", "2"))}

        return (
            self._set("spec", "scaling", "minExecutors", value=lambda: self.count_value((0, 1))),
            self._set("spec", "scaling", "maxExecutors", value=lambda: self.count_value((1, 8))),
            self._set("spec", "scaling", "executorCores", value=lambda: self.count_value((1, 2))),
            self._set("spec", "scaling", "lagTarget", value=lambda: self.count_value((1, 1000))),
            self._set(
                "spec",
                "scaling",
                "stabilizationWindowSeconds",
                value=lambda: self.count_value((0, 60)),
            ),
            self._set("spec", "driver", "cpu", value=quantity),
            self._set("spec", "driver", "memory", value=quantity),
            self._set("spec", "executor", "cpu", value=quantity),
            self._set("spec", "executor", "memory", value=quantity),
            self._set("spec", "sparkConf", value=spark_conf),
            self._set("spec", "checkpoint", "location", value=self.odd_text),
            self._set(
                "spec",
                "trigger",
                value=lambda: {
                    self.rng.choice(("processingTime", "realTime")): self.rng.choice(DURATIONS)
                },
            ),
        )

    def _meta_mutations(self) -> tuple[Callable[[Manifest], None], ...]:
        def annotations() -> Any:
            key = self.rng.choice(("rillet.io/paused", "rillet.io/managed"))
            return {key: self.rng.choice(("true", "false", "TRUE", "", "ü"))}

        return (self._set("metadata", "annotations", value=annotations),)

    def _malformations(self, required: str) -> tuple[Callable[[Manifest], None], ...]:
        """Changes that leave no valid object: a typo, an unknown field, a required field
        dropped, a spec of another type, a bad label or name."""
        return (
            self._set("spec", "partition", value=lambda: 3),
            self._set("spec", self.rng.choice(("ü", "x" * 64, "")), value=self.anything),
            self._drop("spec", required),
            self._set("spec", value=self.anything),
            self._set("metadata", "labels", value=lambda: {"ü": self.odd_text()}),
            self._set(
                "metadata",
                "name",
                value=lambda: self.rng.choice(
                    (self._name("UPPER"), self._name("x" * 300), self._name("ü"), "")
                ),
            ),
        )
