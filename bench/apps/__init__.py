"""App scaling benchmark: executors following partitions, a spike three ways, the cost of Apps.

    .venv/bin/python -m bench.apps [--only growth|spike|cost|pause]  # starts or reuses the stack
    flock /tmp/rillet-node.lock .venv/bin/python -m bench.apps --only nodeloss  # two nodes

Needs the stack's worker node: the Apps run for real from its runtime image. They copy records
from one Topic to another through a deliberately slow pipeline (Thread.sleep per record, as in
tests/integration/test_apps_scaling_on_node.py), with executors of 250m CPU and 1Gi: what fits
the node's 2 CPUs (less CPU, printed, when pods of others already request some). Prints, with
baselines measured in the same run:

- growth: one App (maxExecutors 6, executorCores 1, lagTarget 100) on a Topic grown 2 -> 6
  partitions one at a time, with a backlog that wants more executors than the cap. Per step:
  seconds from `kubectl patch` of the Topic to Kafka having the partitions (the Topic handler),
  to status.executors.desired at the new cap (the scaling loop; the driver reads it within 2 s)
  and to that many executor pods Running (Spark and the kubelet). Target: median <= 10 s to
  requested.
- spike: a burst of SPIKE_RECORDS records then LOW_RATE records/s, on a Topic of CAP partitions,
  run three ways one after the other: (a) Rillet's lag scaling (minExecutors 1, maxExecutors
  CAP); (b) Spark's dynamic allocation (shuffle tracking, 1..CAP executors), which the App API
  refuses (spark.dynamicAllocation.* is Rillet's): the App's objects are built with the
  operator's own `build_app_objects`, the keys added to the driver's Spark conf (its ConfigMap,
  which reaches the driver as RILLET_SPARK_CONF_JSON), and applied with their App in a namespace
  no operator watches, so that no status tells the driver a count and Spark alone decides;
  (c) fixed at CAP executors. Each way meets the burst warm and at rest (its minimum count).
  Per way: seconds from the burst to the consumer group's lag back under DRAINED_LAG (read from
  Kafka the same way for all three), executor-seconds over SPIKE_WINDOW seconds from the burst
  (Running executor pods sampled every second), and scale events: changes of the count the
  autoscaler asks for, as the HPA counts its rescales (the App's status.executors.desired; for
  dynamic allocation Spark's target, numberTargetExecutors of the driver's metrics). Printed
  beside them: changes of the Running pod count (a scale-down ends pods one by one) and moves,
  those changes in one direction within MOVE_SECONDS counted once. Targets:
  executor-seconds of (a) <= 0.60 of (c), drain of (a) <= 1.2x (c), fewer scale events for (a)
  than (b).
- cost: the operator's CPU seconds (to settle, and per minute once settled) and peak and steady
  RSS, from /proc, with COST_APPS Apps and COST_TOPICS Topics, against the same operator with
  the COST_TOPICS Topics alone, each a fresh process. The Apps' drivers request 64 CPUs: no node
  runs them, so their pods stay Pending while the operator does all of its work (objects,
  status, lag reads, pod lists). Target: RSS <= 300 MB.
- pause (bench/apps/pause.py): the longest gap between committed batches (the consumer group's
  offsets in Kafka) during a scale-up and a scale-down, medians over three events each, against
  the steady gap between batches of the same run, with the executor pods before and after each.
  Target: below 2x the steady gap (Flink's autoscaler plans for a 5-minute restart per rescale).
- nodeloss (bench/apps/nodeloss.py), only with `--only nodeloss`, never in the default run: it
  needs a running stack of two nodes with the object store (`rillet dev up --nodes 2
  --object-store`), which it refuses to start or reshape. One App with an s3a:// checkpoint and
  one executor; NODELOSS_ROUNDS driver restarts on a live node (the baseline: `kubectl delete
  pod`), then as many losses of the driver's node (moved to node 2, node 2 stopped as a crash,
  tainted out-of-service once the App says DriverNodeLost, decision 019). Medians of the seconds
  from the delete or the stop to the new driver Running and to its first batch committed (the
  consumer group's offsets in Kafka), their ratio, and the node monitor's part (stop ->
  DriverNodeLost) on its own. Node 2 is left running, Ready and untainted.

Everything is named after one run prefix and removed at the end, on failure too: namespaces,
Kafka topics and consumer groups.

One module per benchmark (growth, spike with spikeways and tasktimelines, cost, pause,
nodeloss), what they share beside them (settings, benches, manifests, observing, reports), and
the command line in `__main__`.
"""
