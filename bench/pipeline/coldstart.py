"""Cold start: a first start, a restart from the checkpoint and a warm standby's takeover,
with and without the drivers' class archive (`--only coldstart`).
"""

from __future__ import annotations

import contextlib
import signal
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import yaml

from bench.pipeline import driverclocks, feeding, manifests, settings

COLD_LINES = 20_000  # the backlog a first start, then a restart, begins with


def standby_takeover(
    running: driverclocks.DriverClock,
    standby: driverclocks.DriverClock,
    bootstrap: str,
    source: str,
) -> tuple[float, float]:
    """(reading, first commit) seconds from SIGKILL of the `running` driver, with COLD_LINES
    lines it did not read, to the warm `standby` (on the same checkpoint) reading them."""
    standby.wait_for_log("warmed up in")
    running.signal(signal.SIGSTOP)  # the lines arrive while it can no longer read them
    feeding.produce_lines(bootstrap, source, COLD_LINES)
    standby.committed_before = running.last_commit()  # what the running one had committed
    killed = time.monotonic()
    running.signal(signal.SIGKILL)
    running.process.wait(timeout=30)
    return standby.first_commit(since=killed)


def cold_start(
    bootstrap: str, workdir: Path, archive: Path | None
) -> tuple[tuple[float, float], ...]:
    """(reading, first commit) seconds of a first start on a backlog of COLD_LINES lines, of a
    restart from the checkpoint on COLD_LINES more, and of a warm standby's takeover from a
    killed driver on COLD_LINES more; the drivers map `archive`, if any."""
    source = feeding.create_topic(
        bootstrap, f"bench.cold.{uuid.uuid4().hex[:8]}", settings.PARTITIONS
    )
    table = f"bench.coldcounts.{uuid.uuid4().hex[:8]}"
    feeding.create_topic(bootstrap, table, settings.PARTITIONS, **{"cleanup.policy": "compact"})
    manifest = workdir / f"{uuid.uuid4().hex}.yaml"
    documents = manifests.app_manifest(source=source, target=table, stateless=False)
    manifest.write_text(yaml.safe_dump_all(documents))
    checkpoint = workdir / uuid.uuid4().hex
    # A path that names no file turns the archive off (rillet.runtime.jvm.classsharing).
    environ = {"RILLET_SPARK_CLASS_ARCHIVE": str(archive or workdir / "no-archive")}
    feeding.produce_lines(bootstrap, source, COLD_LINES)
    first = driverclocks.DriverClock(
        manifest, bootstrap, checkpoint, workdir / "first.log", environ
    )
    try:
        figures = [first.first_commit()]
    finally:
        first.stop()
    feeding.produce_lines(bootstrap, source, COLD_LINES)
    restart = driverclocks.DriverClock(
        manifest, bootstrap, checkpoint, workdir / "restart.log", environ
    )
    standby = None
    try:
        figures.append(restart.first_commit())
        standby = driverclocks.DriverClock(
            manifest, bootstrap, checkpoint, workdir / "standby.log", environ
        )
        figures.append(standby_takeover(restart, standby, bootstrap, source))
        standby.stop()
    finally:  # whatever failed: no driver left running into the next measurement
        for clock in (restart, standby):
            with contextlib.suppress(ProcessLookupError):
                if clock is not None:
                    clock.signal(signal.SIGKILL)
    return tuple(figures)


def cold_starts(bootstrap: str, *, config: settings.Settings) -> None:
    """Cold starts without and with the drivers' class archive, alternated in each run."""
    from rillet_devstack import provisioning

    archive = provisioning.provision(provisioning.SPARK_CLASSES) / provisioning.SPARK_CLASSES_FILE
    runs: dict[str, list[tuple[tuple[float, float], ...]]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory() as tmp:
        for attempt in range(config.repeats):
            for name, used in (("off", None), ("on", archive)):
                figures = cold_start(bootstrap, Path(tmp), used)
                runs[name].append(figures)
                (r1, c1), (r2, c2), (r3, c3) = figures
                print(
                    f"  cold start run {attempt + 1}, class archive {name}: first start reading "
                    f"{r1:.1f} s, first batch committed {c1:.1f} s; restart {r2:.1f} s, "
                    f"{c2:.1f} s; standby takeover {r3:.1f} s, {c3:.1f} s",
                    flush=True,
                )
    print()
    print(
        f"Cold start of the word-count App (`rillet run`, local[2], {COLD_LINES:,} lines waiting), "
        f"median of {config.repeats} runs, seconds from the process's spawn (a standby: from the "
        f"running driver's SIGKILL):"
    )
    restarts, takeovers = {}, {}
    for name, runs_of_one in runs.items():
        (r1, c1), (r2, c2), (r3, c3) = (
            (
                statistics.median(f[i][0] for f in runs_of_one),
                statistics.median(f[i][1] for f in runs_of_one),
            )
            for i in (0, 1, 2)
        )
        restarts[name], takeovers[name] = c2, c3
        print(
            f"  class archive {name}: first start reading {r1:.1f}, first batch committed "
            f"{c1:.1f}; restart reading {r2:.1f}, first batch committed {c2:.1f}; warm standby "
            f"reading {r3:.1f}, first batch committed {c3:.1f}"
        )
    print(
        f"restart to first committed batch: {restarts['on']:.1f} s with the archive, "
        f"{restarts['off']:.1f} s without ({restarts['on'] / restarts['off']:.0%}); "
        f"{takeovers['on']:.1f} s with a warm standby "
        f"({takeovers['on'] / restarts['on']:.0%} of a restart; target <= 5 s)"
    )
