"""(a-eos) against (a): what exactly-once output costs a stateless copy (`--only delivery`)."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

from bench.pipeline import feeding, medians, settings, sparkworker


def bench_delivery(
    bootstrap: str, source: str, workdir: Path, delivery: str, *, config: settings.Settings
) -> tuple[float, float]:
    """Records/s of the stateless copy (each line to a Topic) in local[1] with this delivery:
    whole run, and steady state."""
    target = feeding.create_topic(
        bootstrap, f"bench.copies.{uuid.uuid4().hex[:8]}", settings.PARTITIONS
    )
    figures = sparkworker.run_worker(
        bootstrap,
        "--master",
        "local[1]",
        "--source",
        source,
        "--target",
        target,
        "--checkpoint",
        str(workdir / uuid.uuid4().hex),
        "--trigger",
        "available-now",
        "--partitions",
        str(settings.PARTITIONS),
        "--stateless",
        "--delivery",
        delivery,
    )
    return config.records / float(figures["seconds"]), float(figures["steady"])


def delivery(bootstrap: str, *, config: settings.Settings) -> None:
    """(a-eos) against (a) at-least-once: the same stateless copy of the same topic."""
    source, _ = feeding.input_topic(bootstrap, "bench.lines", records=config.records)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        loose = medians.median_pair(
            "(a) copy, AtLeastOnce",
            lambda: bench_delivery(bootstrap, source, workdir, "AtLeastOnce", config=config),
            config=config,
        )
        once = medians.median_pair(
            "(a-eos) copy, ExactlyOnce",
            lambda: bench_delivery(bootstrap, source, workdir, "ExactlyOnce", config=config),
            config=config,
        )
    print()
    print(
        f"Stateless copy of {config.records:,} lines to a Topic, local[1], median of "
        f"{config.repeats} runs"
    )
    print(f"{'':28}{'records/s':>12}{'steady':>12}")
    for label, (whole, steady) in (("(a) AtLeastOnce", loose), ("(a-eos) ExactlyOnce", once)):
        print(f"{label:<28}{whole:>12,.0f}{steady:>12,.0f}")
    print(
        f"exactly-once costs {1 - once[0] / loose[0]:.0%} of at-least-once throughput over the "
        f"whole run, {1 - once[1] / loose[1]:.0%} in steady state (target <= 20%)"
    )
