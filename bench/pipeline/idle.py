"""Idle cost: the cores an idle word-count driver and the broker use, with Rillet's settings
and with Spark's default polling delay (`--only idle`).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import yaml

from bench.pipeline import driverclocks, feeding, manifests, settings

IDLE_SECONDS = 30


SPARK_POLLING_DELAY = "10ms"  # Spark's default spark.sql.streaming.pollingDelay


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU seconds the processes used so far (those gone meanwhile: none)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


def process_tree(root: int) -> list[int]:
    """`root` and its descendants (the driver's JVM is a child of `rillet run`)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            parents.setdefault(parent, []).append(int(entry.name))
    tree, pending = [], [root]
    while pending:
        pid = pending.pop()
        tree.append(pid)
        pending += parents.get(pid, [])
    return tree


def idle_cost(
    bootstrap: str, broker_pids: list[int], workdir: Path, polling_delay: str | None
) -> tuple[float, float]:
    """Cores used by an idle word-count driver and by the broker (its processes), over
    IDLE_SECONDS after the driver's first batch is committed; `polling_delay`: the App's own
    spark.sql.streaming.pollingDelay."""
    source = feeding.create_topic(
        bootstrap, f"bench.idle.{uuid.uuid4().hex[:8]}", settings.PARTITIONS
    )
    table = f"bench.idlecounts.{uuid.uuid4().hex[:8]}"
    feeding.create_topic(bootstrap, table, settings.PARTITIONS, **{"cleanup.policy": "compact"})
    documents = manifests.app_manifest(source=source, target=table, stateless=False)
    if polling_delay is not None:
        documents[-1]["spec"]["sparkConf"] = {"spark.sql.streaming.pollingDelay": polling_delay}
    manifest = workdir / f"{uuid.uuid4().hex}.yaml"
    manifest.write_text(yaml.safe_dump_all(documents))
    feeding.produce_lines(bootstrap, source, 100)  # a first batch to commit: then the queries idle
    log = workdir / f"idle-{uuid.uuid4().hex[:8]}.log"
    clock = driverclocks.DriverClock(manifest, bootstrap, workdir / uuid.uuid4().hex, log, {})
    try:
        clock.first_commit()
        driver = process_tree(clock.process.pid)
        before = cpu_seconds(driver), cpu_seconds(broker_pids)
        started = time.monotonic()
        time.sleep(IDLE_SECONDS)  # the measurement's window
        elapsed = time.monotonic() - started
        after = cpu_seconds(driver), cpu_seconds(broker_pids)
    finally:
        clock.stop()
    return (after[0] - before[0]) / elapsed, (after[1] - before[1]) / elapsed


def idle_costs(bootstrap: str, *, config: settings.Settings) -> None:
    """Idle cost with Rillet's settings and with Spark's default polling delay, alternated."""
    from rillet_devstack import stack

    state = stack.running()
    assert state is not None  # bootstrap_servers() found it
    broker_pids = [p.pid for p in state.processes if p.name.startswith("kafka")]
    runs: dict[str, list[tuple[float, float]]] = {"rillet": [], "spark": []}
    with tempfile.TemporaryDirectory() as tmp:
        for attempt in range(config.repeats):
            for name, delay in (("spark", SPARK_POLLING_DELAY), ("rillet", None)):
                runs[name].append(idle_cost(bootstrap, broker_pids, Path(tmp), delay))
                driver, broker = runs[name][-1]
                print(
                    f"  idle run {attempt + 1}, {name} polling: driver {driver:.3f} cores, "
                    f"broker {broker:.3f} cores",
                    flush=True,
                )
    medians = {
        name: tuple(statistics.median(r[i] for r in figures) for i in (0, 1))
        for name, figures in runs.items()
    }
    print()
    print(
        f"An idle word-count App (`rillet run`, one query), cores used over {IDLE_SECONDS} s, "
        f"median of {config.repeats} runs:"
    )
    for name, label in (
        ("spark", f"Spark's polling delay ({SPARK_POLLING_DELAY})"),
        ("rillet", "Rillet's"),
    ):
        driver, broker = medians[name]
        print(f"  {label:<34} driver {driver:.3f}, broker {broker:.3f}")
    (rd, rb), (sd, sb) = medians["rillet"], medians["spark"]
    print(
        f"idle cost with Rillet's settings: driver {rd / sd:.0%}, broker {rb / sb:.0%} of Spark's"
    )
