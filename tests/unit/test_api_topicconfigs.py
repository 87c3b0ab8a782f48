"""The Kafka topic configs a Topic or Table accepts, and how their values are checked.

Test plan:
- the key list is Kafka 4.1's topic configs: the usual ones are there, removed ones are not;
- each value kind accepts what Kafka parses and refuses the rest, the same way as the CEL rules
  (which use the same patterns);
- every choice key lists its choices.
"""

from __future__ import annotations

import pytest

from rillet.api.v1alpha1 import topicconfigs


def test_known_keys_are_kafka_4_topic_configs() -> None:
    assert {
        "cleanup.policy",
        "retention.ms",
        "retention.bytes",
        "segment.bytes",
        "segment.ms",
        "min.insync.replicas",
        "compression.type",
        "max.message.bytes",
        "delete.retention.ms",
        "min.compaction.lag.ms",
        "max.compaction.lag.ms",
        "min.cleanable.dirty.ratio",
        "message.timestamp.type",
        "unclean.leader.election.enable",
        "local.retention.ms",
        "local.retention.bytes",
        "remote.storage.enable",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "compression.zstd.level",
    } <= topicconfigs.KNOWN_KEYS
    assert not topicconfigs.KNOWN_KEYS & {
        "message.downconversion.enable",
        "message.format.version",
        "message.timestamp.difference.max.ms",
        "log.retention.ms",
    }
    assert len(topicconfigs.KEYS) == len(topicconfigs.KNOWN_KEYS) == 33


def test_choice_keys_list_their_choices() -> None:
    for key in topicconfigs.KEYS:
        assert bool(key.choices) == (key.kind == "choice"), key.name


@pytest.mark.parametrize(
    ("name", "value", "fits"),
    [
        ("retention.ms", 604800000, True),
        ("retention.ms", "604800000", True),
        ("retention.ms", -1, True),
        ("retention.ms", "-1", True),
        ("retention.ms", "7d", False),
        ("retention.ms", "1.5", False),
        ("min.cleanable.dirty.ratio", "0.5", True),
        ("min.cleanable.dirty.ratio", ".5", True),
        ("min.cleanable.dirty.ratio", 1, True),
        ("min.cleanable.dirty.ratio", "1e-3", True),
        ("min.cleanable.dirty.ratio", "half", False),
        ("preallocate", "true", True),
        ("preallocate", "false", True),
        ("preallocate", "True", False),
        ("preallocate", 1, False),
        ("cleanup.policy", "compact,delete", True),
        ("cleanup.policy", "compact, delete", False),
        ("cleanup.policy", 1, False),
        ("compression.type", "zstd", True),
        ("compression.type", "none", False),
        ("message.timestamp.type", "LogAppendTime", True),
        ("leader.replication.throttled.replicas", "*", True),
        ("leader.replication.throttled.replicas", 1, False),
    ],
)
def test_values_fit_their_kafka_type(name: str, value: int | str, fits: bool) -> None:
    assert topicconfigs.value_fits(topicconfigs.BY_NAME[name], value) is fits
