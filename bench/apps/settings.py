"""The apps benchmark's fixed settings: the stack's API group, the pods' requests, the spike's
shape and the operator's resync period.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GROUP, VERSION = "rillet.io", "v1alpha1"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# The operator's production default: Topics are re-checked against Kafka every 30 s.
RESYNC_SECONDS = 30.0

# Small requests (installs.NODE_DRIVER, NODE_EXECUTOR): the driver and six executors share the
# node's two CPUs (executors get less than EXECUTOR_CPU_MILLIS when pods of others, say the
# demo, already hold some: `fitting_cpu`).
DRIVER_CPU_MILLIS = 250
EXECUTOR_CPU_MILLIS = 250

CAP = 4  # partitions of the spike's input, and at most that many executors
SPIKE_SLEEP_MS = 2
SPIKE_RECORDS = 20_000  # some 20 s of work for CAP executors on the shared node
LOW_RATE = 50  # records per second after the burst
SPIKE_WINDOW = 180.0  # seconds from the burst over which executor-seconds are counted
DRAIN_TIMEOUT = 600.0
MOVE_SECONDS = 5.0  # changes of the executor count closer than this in one direction: one move
DRAINED_LAG = 5 * LOW_RATE  # "back to ~0": five seconds of the low rate
WARMUP_RECORDS = 200
SPIKE_LAG_TARGET = 1000
SPIKE_STABILIZATION_SECONDS = 30
SPARK_UI_PORT = 4040
TARGET_EXECUTORS_GAUGE = "ExecutorAllocationManager.executors.numberTargetExecutors"
DYNAMIC_ALLOCATION = {  # Spark's defaults otherwise: executorIdleTimeout 60s, backlog 1s
    "spark.dynamicAllocation.enabled": "true",
    "spark.dynamicAllocation.shuffleTracking.enabled": "true",
    "spark.dynamicAllocation.minExecutors": "1",
    "spark.dynamicAllocation.initialExecutors": "1",
    "spark.dynamicAllocation.maxExecutors": str(CAP),
    # The UI, off in every App's pods, serves the target count this way is read by (spike.py).
    "spark.ui.enabled": "true",
}

# The node-loss benchmark's rounds: as many driver restarts (its baseline) as node losses.
NODELOSS_ROUNDS = 3
