"""Avro and Protobuf against JSON input (`--only formats`): the same word count over the same
lines, as `{"line": ...}` JSON values, as Avro records and as Protobuf messages in the Confluent
wire format, and as plain strings (the reference that decodes nothing), each in a topic of its
own.

Every run is the word-count App in a Spark worker (sparkworker), the same Spark settings as
(a), with the App's input of that format, in batches of MAX_OFFSETS or fewer records (at least
FORMATS_BATCHES batches: the steady state, after the first batch, is where decoding shows
without the start's fixed costs). Each repeat runs every format once, JSON and Avro back to
back, in an order reversed every other repeat, so that a drift of the machine's load falls on
both alike; the target is judged on the median of each repeat's Avro/JSON ratio (runs paired
by repeat), which the load of a shared machine moves far less than the formats' own medians.
Target (issue 37): Avro at least as fast as JSON, which parses text. Protobuf has no target:
Spark's protobuf connector is not served here, so Rillet decodes it in Python workers (an Arrow
UDF, docs/formats.md); the figure says what that costs.
"""

from __future__ import annotations

import dataclasses
import statistics
import tempfile
import uuid
from pathlib import Path

from bench.pipeline import feeding, lineformats, settings, sparkworker

FORMATS = ("json", "avro", "protobuf", "string")  # JSON and Avro, the target's pair, adjacent
REGISTERED = ("avro", "protobuf")


@dataclasses.dataclass(frozen=True)
class Rates:
    """Records/s of one format on one master, each repeat's: whole run, and after the first
    batch; and the seconds of each repeat's start and first batch."""

    wholes: tuple[float, ...]
    steadies: tuple[float, ...]
    starts: tuple[float, ...]

    @property
    def whole(self) -> float:
        """The median whole-run rate."""
        return statistics.median(self.wholes)

    @property
    def steady(self) -> float:
        """The median rate after the first batch."""
        return statistics.median(self.steadies)


def run_order(attempt: int) -> tuple[str, ...]:
    """The formats in the order repeat `attempt` runs them: FORMATS, reversed every other
    repeat (JSON and Avro stay neighbours, each first in turn)."""
    return FORMATS if attempt % 2 == 0 else FORMATS[::-1]


def paired_ratios(numerator: tuple[float, ...], denominator: tuple[float, ...]) -> list[float]:
    """Each repeat's ratio of two formats' rates (the runs of a repeat are neighbours in time)."""
    return [n / max(d, 1e-9) for n, d in zip(numerator, denominator, strict=True)]


def paired_median(numerator: tuple[float, ...], denominator: tuple[float, ...]) -> float:
    """The median of the repeats' paired ratios (paired_ratios)."""
    return statistics.median(paired_ratios(numerator, denominator))


def formats(bootstrap: str, *, config: settings.Settings) -> None:
    environment = lineformats.registry_environment()
    if environment is None:
        print("formats: skipped, the local stack runs no schema registry (--schema-registry)")
        return
    client = lineformats.registry_client(environment)
    topics: dict[str, str] = {}
    try:
        for value_format in FORMATS:
            topics[value_format] = feeding.create_topic(
                bootstrap, f"bench.lines-{value_format}.{uuid.uuid4().hex[:8]}", settings.PARTITIONS
            )
        encoders: dict[str, feeding.Encode | None] = {
            "json": lineformats.json_line,
            "avro": lineformats.avro_encoder(client, topics["avro"]),
            "protobuf": lineformats.protobuf_encoder(client, topics["protobuf"]),
            "string": None,
        }
        for value_format, topic in topics.items():
            print(f"producing {config.records:,} {value_format} lines into {topic} ...", flush=True)
            feeding.produce_lines(bootstrap, topic, config.records, encode=encoders[value_format])
        with tempfile.TemporaryDirectory() as tmp:
            rates = {
                master: measure(bootstrap, topics, master, Path(tmp), environment, config=config)
                for master in settings.FORMATS_MASTERS
            }
    finally:
        lineformats.delete_subjects(client, [t for f, t in topics.items() if f in REGISTERED])
    report(rates, config=config)


def measure(
    bootstrap: str,
    topics: dict[str, str],
    master: str,
    workdir: Path,
    environment: dict[str, str],
    *,
    config: settings.Settings,
) -> dict[str, Rates]:
    """Each format's rates on `master`, every repeat running each format once (run_order)."""
    runs: dict[str, list[tuple[float, float, float]]] = {f: [] for f in FORMATS}
    for attempt in range(config.repeats):
        for value_format in run_order(attempt):
            whole, steady, start = run_format(
                bootstrap,
                topics[value_format],
                value_format,
                master,
                workdir,
                environment,
                batch=batch_size(config),
            )
            whole = config.records / whole
            runs[value_format].append((whole, steady, start))
            print(
                f"  {value_format:<6} {master} run {attempt + 1}: {whole:,.0f} records/s whole "
                f"run, {steady:,.0f} after the first batch",
                flush=True,
            )
    return {
        f: Rates(
            wholes=tuple(r[0] for r in rs),
            steadies=tuple(r[1] for r in rs),
            starts=tuple(r[2] for r in rs),
        )
        for f, rs in runs.items()
    }


def run_format(
    bootstrap: str,
    source: str,
    value_format: str,
    master: str,
    workdir: Path,
    environment: dict[str, str],
    *,
    batch: int,
) -> tuple[float, float, float]:
    """One run of the App over `source`: (seconds for the whole topic, steady records/s,
    seconds of its queries' start and first batch)."""
    figures = sparkworker.count_words(
        bootstrap,
        source,
        master,
        workdir,
        "--format",
        value_format,
        "--max-offsets",
        str(batch),
        # The registry's URL and credentials, as `rillet dev env` exports them for `rillet run`.
        env=environment,
    )
    start = float(figures["start"]) + float(figures["first"])
    return float(figures["seconds"]), float(figures["steady"]), start


def batch_size(config: settings.Settings) -> int:
    """Records per batch: MAX_OFFSETS, or fewer for FORMATS_BATCHES batches at least."""
    return max(1, min(settings.MAX_OFFSETS, config.records // settings.FORMATS_BATCHES))


def cores(master: str) -> int:
    """Task slots of a local master: local[N] -> N."""
    return int(master.removeprefix("local[").removesuffix("]"))


def report(rates: dict[str, dict[str, Rates]], *, config: settings.Settings) -> None:
    """Per master: each format's medians, per core, then the medians of paired ratios:
    Avro/JSON against the target, and Protobuf/JSON."""
    print()
    print(
        f"Word count by input format over {config.records:,} lines, {settings.PARTITIONS} "
        f"partitions, batches of {batch_size(config):,}, median of {config.repeats} runs "
        "(2 cores shared with the broker)"
    )
    print(f"{'':18}{'records/s':>12}{'per core':>12}{'steady/s':>12}{'per core':>12}")
    for master, by_format in rates.items():
        n = cores(master)
        for value_format, rate in by_format.items():
            print(
                f"{value_format + ' ' + master:<18}{rate.whole:>12,.0f}{rate.whole / n:>12,.0f}"
                f"{rate.steady:>12,.0f}{rate.steady / n:>12,.0f}"
            )
    for master, by_format in rates.items():
        avro, json, string = by_format["avro"], by_format["json"], by_format["string"]
        protobuf = by_format["protobuf"]
        paired = paired_ratios(avro.wholes, json.wholes)
        whole = statistics.median(paired)
        steady = paired_median(avro.steadies, json.steadies)
        holds = "holds" if whole >= 1.0 else "does not hold"
        print(
            f"{master}: Avro/JSON = {whole:.2f}x whole run, {steady:.2f}x steady state (medians "
            f"of the repeats' paired ratios; whole run: "
            f"{', '.join(f'{r:.2f}' for r in paired)}): the target (>= 1.0x whole run) {holds}; "
            f"against string (no decoding): JSON "
            f"{paired_median(json.wholes, string.wholes):.0%}, Avro "
            f"{paired_median(avro.wholes, string.wholes):.0%}"
        )
        print(
            f"{master}: start and first batch (medians, the run's fixed cost): JSON "
            f"{statistics.median(json.starts):.2f} s, Avro {statistics.median(avro.starts):.2f} s"
            f" of whole runs of {config.records / json.whole:.1f} s and "
            f"{config.records / avro.whole:.1f} s"
        )
        print(
            f"{master}: Protobuf/JSON = "
            f"{paired_median(protobuf.wholes, json.wholes):.2f}x whole run, "
            f"{paired_median(protobuf.steadies, json.steadies):.2f}x steady "
            f"state (decoded in Python workers; no target); against string: "
            f"{paired_median(protobuf.wholes, string.wholes):.0%}"
        )
