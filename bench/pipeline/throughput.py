"""Throughput, (a) to (e): the word-count App, the hand-written job and Spark's Kafka source
against the baselines, and the table and ratios they make (`--only throughput`).
"""

from __future__ import annotations

import dataclasses
import tempfile
import uuid
from pathlib import Path

from bench.pipeline import (
    consumerperf,
    faustcount,
    feeding,
    kafkastreams,
    medians,
    plain,
    settings,
    sparkworker,
)


def bench_spark(
    bootstrap: str,
    source: str,
    master: str,
    workdir: Path,
    *,
    hand: bool = False,
    config: settings.Settings,
) -> tuple[float, float]:
    """Records/s of the word-count App over the whole topic, and over its batches after the
    first (which also warms up the JVM's JIT, code generation and Kafka connections); `hand`:
    of the hand-written PySpark job instead."""
    figures = sparkworker.count_words(
        bootstrap, source, master, workdir, *(["--hand"] if hand else [])
    )
    return config.records / float(figures["seconds"]), float(figures["steady"])


def bench_spark_source(bootstrap: str, source: str, workdir: Path) -> tuple[float, float]:
    """Records/s of Spark's Kafka source alone in local[1]: (cold, warm)."""
    figures = sparkworker.run_worker(
        bootstrap,
        "--master",
        "local[1]",
        "--source",
        source,
        "--target",
        "unused",
        "--checkpoint",
        str(workdir / uuid.uuid4().hex),
        "--trigger",
        "source-count",
        "--partitions",
        str(settings.PARTITIONS),
    )
    return float(figures["cold"]), float(figures["warm"])


Pair = tuple[float, float]  # records/s over the whole run, and in steady state (or cold, warm)


@dataclasses.dataclass(frozen=True)
class Figures:
    """The medians of every way of running the word count (per way: see the package's doc)."""

    spark1: Pair
    spark2: Pair
    hand: Pair
    streams: dict[str, Pair]
    source_only: Pair
    plain: float
    faust: float
    ceiling: float


def throughput(bootstrap: str, *, config: settings.Settings) -> None:
    source, words = feeding.input_topic(bootstrap, "bench.sentences", records=config.records)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        spark1, spark2, hand = measure_spark(bootstrap, source, workdir, config=config)
        figures = measure_peers(
            bootstrap, source, workdir, words, spark=(spark1, spark2, hand), config=config
        )
    report(figures, config=config)


def measure_spark(
    bootstrap: str, source: str, workdir: Path, *, config: settings.Settings
) -> tuple[Pair, Pair, Pair]:
    """(a) in local[1] and local[2], and (a-hand)."""
    spark1 = medians.median_pair(
        "(a) Spark local[1]",
        lambda: bench_spark(bootstrap, source, "local[1]", workdir, config=config),
        config=config,
    )
    spark2 = medians.median_pair(
        "(a) Spark local[2]",
        lambda: bench_spark(bootstrap, source, "local[2]", workdir, config=config),
        config=config,
    )
    hand = medians.median_pair(
        "(a-hand) PySpark by hand local[1]",
        lambda: bench_spark(bootstrap, source, "local[1]", workdir, hand=True, config=config),
        config=config,
    )
    return spark1, spark2, hand


def measure_peers(
    bootstrap: str,
    source: str,
    workdir: Path,
    words: int,
    *,
    spark: tuple[Pair, Pair, Pair],
    config: settings.Settings,
) -> Figures:
    """(e), (a0), (b), (c) and (d), beside the `spark` figures measured before."""
    classpath = kafkastreams.kafka_streams_classpath(workdir)
    streams = {
        guarantee: medians.median_pair(
            f"(e) Kafka Streams {guarantee}",
            lambda guarantee=guarantee: kafkastreams.bench_kafka_streams(
                bootstrap, source, words, guarantee, classpath, workdir, config=config
            ),
            config=config,
        )
        for guarantee in ("at_least_once", "exactly_once_v2")
    }
    source_only = medians.median_pair(
        "(a0) Spark Kafka source alone",
        lambda: bench_spark_source(bootstrap, source, workdir),
        names=("cold", "warm"),
        config=config,
    )
    looped = medians.median_of(
        "(b) confluent-kafka loop",
        lambda: plain.bench_plain(bootstrap, source, config=config),
        config=config,
    )
    faust = medians.median_of(
        "(c) Faust",
        lambda: faustcount.bench_faust(bootstrap, source, workdir),
        config=config,
    )
    ceiling = medians.median_of(
        "(d) ConsumerPerformance",
        lambda: consumerperf.bench_consumer_performance(bootstrap, source, config=config),
        config=config,
    )
    spark1, spark2, hand = spark
    return Figures(spark1, spark2, hand, streams, source_only, looped, faust, ceiling)


def report(figures: Figures, *, config: settings.Settings) -> None:
    """The throughput table and the ratios the issue asks for (per core, whole run)."""
    spark1, spark2, hand = figures.spark1, figures.spark2, figures.hand
    streams, source_only = figures.streams, figures.source_only
    plain, faust, ceiling = figures.plain, figures.faust, figures.ceiling
    rows = [
        ("(a) Rillet App local[1]", spark1[0], spark1[0], f"steady {spark1[1]:,.0f}/s"),
        (
            "(a) Rillet App local[2]",
            spark2[0],
            spark2[0] / 2,
            f"steady {spark2[1]:,.0f}/s, {spark2[1] / 2:,.0f}/s per core",
        ),
        ("(a-hand) PySpark by hand [1]", hand[0], hand[0], f"steady {hand[1]:,.0f}/s"),
        *(
            (f"(e) Kafka Streams {name}", rate, rate, f"steady {steady:,.0f}/s, 1 thread")
            for name, (rate, steady) in streams.items()
        ),
        (
            "(a0) Spark Kafka source",
            source_only[0],
            source_only[0],
            f"count(*) only, local[1]; warm {source_only[1]:,.0f}/s",
        ),
        ("(b) confluent-kafka loop", plain, plain, ""),
        ("(c) Faust worker", faust, faust, f"{settings.FAUST_RECORDS:,} records"),
        ("(d) ConsumerPerformance", ceiling, ceiling, "the ceiling: fetch rate, 1 consumer"),
    ]
    print()
    print(
        f"Word count over {config.records:,} lines, {settings.PARTITIONS} partitions, batches of "
        f"{settings.MAX_OFFSETS:,}, median of {config.repeats} runs (2 cores shared with the "
        "broker)"
    )
    print(f"{'':28}{'records/s':>12}{'per core':>12}")
    for label, rate, per_core, note in rows:
        print(f"{label:<28}{rate:>12,.0f}{per_core:>12,.0f}  {note}")
    report_ratios(figures)


def report_ratios(figures: Figures) -> None:
    """The ratios against the peers and the ceilings, each on a line."""
    spark1, spark2, hand = figures.spark1, figures.spark2, figures.hand
    peer, source_only = figures.streams["at_least_once"], figures.source_only
    faust, ceiling = figures.faust, figures.ceiling
    for name, per_core in (("local[1]", spark1[0]), ("local[2]", spark2[0] / 2)):
        print(
            f"{name}: (a)/(c) = {per_core / faust:.1f}x (target >= 5x), "
            f"(a)/(d) = {per_core / ceiling:.0%} (a fetch-only ceiling, no longer a target)"
        )
    for name, per_core in (("local[1]", spark1[1]), ("local[2]", spark2[1] / 2)):
        print(
            f"{name} steady state: (a)/(c) = {per_core / faust:.1f}x, "
            f"(a)/(d) = {per_core / ceiling:.0%}"
        )
    for name, whole, steady in (
        ("local[1]", spark1[0], spark1[1]),
        ("local[2]", spark2[0] / 2, spark2[1] / 2),
    ):
        print(
            f"{name} per core / Kafka Streams at_least_once: {whole / peer[0]:.2f}x whole run "
            f"(target >= 2x), {steady / peer[1]:.2f}x steady state (target >= 3x)"
        )
    print(
        f"Rillet's overhead over the hand-written job (local[1]): {1 - spark1[0] / hand[0]:.0%} "
        f"whole run, {1 - spark1[1] / hand[1]:.0%} steady state (target <= 5%)"
    )
    print(
        f"Spark's Kafka source alone: cold {source_only[0] / ceiling:.0%}, warm "
        f"{source_only[1] / ceiling:.0%} of (d): the bound on (a)/(d) for any Spark pipeline; "
        f"local[1] steady state reaches {spark1[1] / source_only[1]:.0%} of it"
    )
