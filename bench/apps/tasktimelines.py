"""Where a spike's drain went, from the driver's REST API: executors added and the longest
tasks.
"""

from __future__ import annotations

import datetime
import json
import urllib.request

from bench.apps import benches, observing, settings, spikeways


def _spark_time(stamp: str) -> float:
    """Epoch seconds of a time Spark's REST API gives ("2026-11-25T03:00:00.123GMT")."""
    parsed = datetime.datetime.strptime(stamp.removesuffix("GMT"), "%Y-%m-%dT%H:%M:%S.%f")
    return parsed.replace(tzinfo=datetime.UTC).timestamp()


def print_task_timeline(
    b: benches.Bench, way: spikeways.Way, burst_wall: float, drained: float | None
) -> None:
    """Where the drain's seconds went, from the driver's REST API: when each executor was added
    and the longest tasks between the burst and the drain (executor, launch, duration), all of
    them dumped under the logs, the longest printed. Only for the dynamic-allocation way: an
    App's pods run without Spark's UI (reconcile.sparkdefaults.SECURITY_DEFAULTS)."""
    if not way.unwatched:
        print(f"  {way.label}: no task timeline (Apps run without Spark's UI)", flush=True)
        return
    drivers = [
        p for p in observing.pods_of(b.core, way.namespace, way.app, "driver") if p.status.pod_ip
    ]
    if not drivers:
        return
    base = f"http://{drivers[0].status.pod_ip}:{settings.SPARK_UI_PORT}/api/v1/applications"
    try:
        with urllib.request.urlopen(base, timeout=10) as response:
            app_id = json.load(response)[0]["id"]
        with urllib.request.urlopen(f"{base}/{app_id}/allexecutors", timeout=10) as response:
            executors = json.load(response)
        url = f"{base}/{app_id}/stages?details=true&status=complete"
        with urllib.request.urlopen(url, timeout=30) as response:
            stages = json.load(response)
    except OSError as error:
        print(f"  {way.label}: no task timeline ({error})", flush=True)
        return
    end = burst_wall + (drained if drained is not None else settings.SPIKE_WINDOW)
    tasks = [
        {
            "executor": task["executorId"],
            "launched": round(_spark_time(task["launchTime"]) - burst_wall, 1),
            "seconds": round(task.get("duration", 0) / 1000, 1),
            "stage": stage["stageId"],
        }
        for stage in stages
        for task in (stage.get("tasks") or {}).values()
        if burst_wall - 5 <= _spark_time(task["launchTime"]) <= end
    ]
    added = {
        e["id"]: round(_spark_time(e["addTime"]) - burst_wall, 1)
        for e in executors
        if e["id"] != "driver" and _spark_time(e["addTime"]) >= burst_wall - 5
    }
    (b.logs / f"tasks-{way.app}.json").write_text(
        json.dumps({"executorsAdded": added, "tasks": tasks}, indent=1)
    )
    longest = sorted(tasks, key=lambda task: -float(task["seconds"]))[: settings.CAP * 2]
    print(
        f"  {way.label}: executors added at {sorted(added.values())} s; longest tasks "
        + ", ".join(
            f"exec {t['executor']} at {t['launched']} s for {t['seconds']} s" for t in longest
        ),
        flush=True,
    )
