"""The apps benchmark's command line:
`python -m bench.apps [--only growth|spike|cost|pause|nodeloss]`."""

from __future__ import annotations

import argparse
import json
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from kubernetes import client, config

import bench.apps
from bench.apps import benches, cost, growth, nodeloss, pause, reports, settings, spike
from rillet.kafka.lag import LagReader
from rillet_devstack import stack as devstack
from rillet_devstack import starting, tools

Reporting = Callable[[], reports.Report]  # a report, made once every benchmark has run


def main() -> None:
    doc = bench.apps.__doc__ or ""
    parser = argparse.ArgumentParser(prog="python -m bench.apps", description=doc.splitlines()[0])
    parser.add_argument(
        "--only",
        choices=["growth", "spike", "cost", "pause", "nodeloss"],
        help="one part only (nodeloss runs only when asked: it needs two nodes)",
    )
    only = parser.parse_args().only
    if only == "nodeloss":  # before open_bench, which would start a stack of one node
        nodeloss.require_stack(devstack.running())
    b = open_bench()
    print(
        f"run {b.run}; operator logs in {b.logs}; the node has {b.free_cpu_millis}m CPU free: "
        f"executors of {b.fitting_cpu(growth.GROWTH_PARTITIONS[-1])} (growth), "
        f"{b.fitting_cpu(settings.CAP)} (spike)",
        flush=True,
    )
    try:
        made = run_benchmarks(b, only=only)
    finally:
        b.cleanup()
    figures: dict[str, Any] = {}
    lines: list[str] = []
    for report in made:
        more, said = report()
        figures |= more
        lines += said
    print(json.dumps(figures, indent=2))
    print("\n".join(lines))


def open_bench() -> benches.Bench:
    """The stack (started unless running), its CRDs applied, and the run's clients."""
    # A running stack is reused whatever its shape (`up` would restart one of another shape:
    # the stack may be shared), with the images of the sources as they are now.
    running_stack = devstack.running()
    state = starting.with_current_images(running_stack) if running_stack else starting.up()
    if state.node is None or "runtime" not in state.node.images:
        raise SystemExit("the stack runs without a node: the Apps need it (`rillet dev up`)")
    config.load_kube_config(config_file=str(state.kubeconfig))  # type: ignore[no-untyped-call]
    tools.run_kubectl(
        state.kubeconfig,
        ["apply", "--server-side", "--force-conflicts", "-f", str(settings.REPO / "crds")],
    )
    run = f"bench-apps-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api()
    return benches.Bench(
        state=state,
        image=state.node.images["runtime"],
        run=run,
        # Quiet: librdkafka notices (a partition count changed) are what the run is about.
        admin=AdminClient({"bootstrap.servers": state.kafka_bootstrap, "log_level": 3}),
        custom=client.CustomObjectsApi(),
        core=core,
        # As the operator's AppKube has it: the apiserver of its kubeconfig.
        apiserver_url=str(client.Configuration.get_default_copy().host),
        logs=Path(tempfile.mkdtemp(prefix=f"{run}-")),
        free_cpu_millis=benches.free_cpu(core, state.node.name),
    )


def run_benchmarks(b: benches.Bench, *, only: str | None) -> list[Reporting]:
    """Each benchmark asked for, in order; their reports, to make once all have run."""
    reader = LagReader({"bootstrap.servers": b.bootstrap}, timeout=5)
    made: list[Reporting] = []
    if only in (None, "growth", "spike", "pause"):
        namespace = b.namespace("apps")
        operator = b.operator(namespace)
        if only in (None, "growth"):
            steps = growth.growth(b, namespace, reader)
            made.append(lambda: growth.report_growth(steps))
        if only in (None, "spike"):
            outcomes = spike.spike(b, namespace, reader)
            made.append(lambda: spike.report_spike(outcomes))
        if only in (None, "pause"):
            paused = pause.pause(b, namespace)
            made.append(lambda: pause.report(paused))
        operator.stop()
        b.drop_namespace(namespace)
    if only in (None, "cost"):
        baseline = cost.cost(b, with_apps=False)
        print(f"  cost, Topics alone: {baseline}", flush=True)
        full = cost.cost(b, with_apps=True)
        print(f"  cost, with Apps: {full}", flush=True)
        made.append(lambda: cost.report_cost(baseline, full))
    if only == "nodeloss":
        namespace = b.namespace("nodeloss")
        operator = b.operator(namespace)
        lost = nodeloss.nodeloss(b, namespace)
        made.append(lambda: nodeloss.report(lost))
        operator.stop()
        b.drop_namespace(namespace)
    return made


if __name__ == "__main__":
    main()
