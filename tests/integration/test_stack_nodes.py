"""The stack with two worker nodes (`rillet dev up --nodes 2`), as a user runs it.

The module's fixture asks the shared stack for two nodes with `rillet dev up --nodes 2`: a stack
of one gets the second (the suite may have started with one), one of two is reused as it is.
The second node stays for the rest of the session; `rillet dev down` takes it away with the
stack (that it leaves nothing behind is tests/integration/check_stack_down.py's, run by
`make test-stack-down`: it stops the stack, so it is not part of `make test`).

Test plan:
- both nodes are Ready, untainted, with their own addresses and pod ranges; `rillet dev
  status` lists each node with the pods it runs (namespace/name);
- a pod on node 2 running `rillet/spark-runtime:0.1.0` (the name examples/*.yaml use) reaches,
  from its own pod range, a pod on node 1 by IP, a Service (by its cluster DNS name) whose only
  endpoint is on node 1, the apiserver through the `kubernetes` Service, and Kafka (an
  ApiVersions answer from the stack's broker); and the object store and the schema registry
  (its 401 to a client without credentials) when the stack has them (`rillet dev env`). The
  node-1 pod reaches the node-2 pod back;
- `rillet dev node stop rillet-node-2` kills the node as a crash would: its Node goes NotReady
  within the stack's grace period (20 s; Kubernetes' default 50 s would miss the deadline of
  40 s), and `status` shows it stopped; `rillet dev node
  start` has it Ready again within seconds, and a new pod runs there. Node 1 is refused, saying
  why;
- node 2's kubelet killed alone is started again by its node (as systemd would), saying so in
  its log, and the node stays Ready.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rillet_devstack import extranoderunning, extranodes
from rillet_devstack import stack as devstack

from . import nodes
from .conftest import Kube
from .polling import wait_for

NODE_2 = nodes.NODE_2
RUNTIME = "rillet/spark-runtime:0.1.0"  # as examples/*.yaml name it
# The controller marks a node NotReady 20 s (the stack's --node-monitor-grace-period) after its
# last heartbeat, checked every 5 s; the kubelet renews its Lease every 5 s.
NOT_READY_DEADLINE = 40
READY_AGAIN_DEADLINE = 30

# Run inside the node-2 pod: each check prints one `OK name detail` or `FAIL name detail`.
CHECKS = r"""
import json, os, socket, ssl, struct, sys, time, urllib.request
args = json.loads(sys.argv[1])
def check(name, probe):
    # Tried again for up to 20 s, as a client would: a new Service's rules reach node 2's
    # kube-proxy a moment after its endpoint is ready (CI once saw "connection refused").
    deadline = time.monotonic() + 20
    while True:
        try:
            print("OK", name, probe(), flush=True)
            return
        except Exception as error:
            if time.monotonic() > deadline:
                print("FAIL", name, repr(error), flush=True)
                return
            time.sleep(0.5)
def http(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status
def kafka_api_versions():
    host, port = args["kafka"].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        body = struct.pack(">hhih", 18, 0, 42, 4) + b"test"
        conn.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", conn.recv(4))[0]
        data = b""
        while len(data) < size:
            data += conn.recv(size - len(data))
        correlation, error = struct.unpack(">ih", data[:6])
        assert (correlation, error) == (42, 0), (correlation, error)
        return f"correlation={correlation} error={error}"
def apiserver():
    token = open("/var/run/secrets/kubernetes.io/serviceaccount/token").read()
    context = ssl.create_default_context(
        cafile="/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
    request = urllib.request.Request(
        "https://kubernetes.default.svc/version", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        return json.load(response)["gitVersion"]
check("pod-ip", lambda: http(f"http://{args['pod_ip']}:8080/"))
check("dns", lambda: socket.gethostbyname(args["service_dns"]))
check("service", lambda: http(f"http://{args['service_dns']}:8080/"))
check("apiserver", apiserver)
check("kafka", kafka_api_versions)
if args.get("s3"):
    def s3():
        try:
            return http(args["s3"])
        except urllib.error.HTTPError as error:  # an answer all the same (403: anonymous)
            return error.code
    check("object-store", s3)
if args.get("registry"):
    def registry():
        try:
            return http(args["registry"] + "/subjects")
        except urllib.error.HTTPError as error:  # its answer to a client without credentials
            return error.code
    check("schema-registry", registry)
"""


@pytest.fixture(scope="module")
def two_nodes(stack: devstack.StackState, runtime_image: str) -> devstack.StackState:
    """The shared stack with (at least) two nodes; the runtime image puts the module in the
    node's xdist group: no other test's pods run meanwhile on the node this one stops (those of
    test_node.py and test_node_chart.py, outside the group, are held on node 1)."""
    return nodes.grow_to_two()


def _node(kube: Kube, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(kube.kubectl("get", "node", name, "-o", "json").stdout)
    return found


def _ready(found: dict[str, Any]) -> str:
    conditions = found["status"].get("conditions") or []
    return next((c["status"] for c in conditions if c["type"] == "Ready"), "Unknown")


def _pod(name: str, node: str, command: list[str], **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": RUNTIME, "command": command}],
        },
    }


def _serve(name: str, node: str) -> dict[str, Any]:
    return _pod(name, node, ["python3", "-m", "http.server", "8080"], app=name)


def _apply(kube: Kube, namespace: str, *manifests: dict[str, Any]) -> None:
    for manifest in manifests:
        kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))


def _running_pod(kube: Kube, namespace: str, name: str, timeout: float = 120) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        found = kube.api.read("pod", name, namespace) or {}
        statuses = found.get("status", {}).get("containerStatuses") or []
        return found if statuses and all(s.get("ready") for s in statuses) else None

    return wait_for(ready, timeout=timeout, interval=0.5, what=f"pod {namespace}/{name} ready")


def test_both_nodes_ready_and_listed_with_their_pods(
    two_nodes: devstack.StackState, kube: Kube, namespace: str
) -> None:
    found = {name: _node(kube, name) for name in ("rillet-node", NODE_2)}
    _apply(kube, namespace, _serve("on-two", NODE_2))
    pod = _running_pod(kube, namespace, "on-two")

    status = nodes.rillet("dev", "status", timeout=120)

    assert {name: _ready(node) for name, node in found.items()} == {
        "rillet-node": "True",
        NODE_2: "True",
    }
    assert not found[NODE_2]["spec"].get("taints")
    addresses = [a["address"] for a in found[NODE_2]["status"]["addresses"]]
    assert "10.99.2.2" in addresses
    assert pod["spec"]["nodeName"] == NODE_2
    assert pod["status"]["podIP"].startswith("10.244.1.")
    assert status.returncode == 0, status.stderr
    lines = status.stderr.splitlines()
    at = lines.index(f"node {NODE_2} 10.99.2.2 Ready=True")
    below = lines[at + 1 :]
    ours = next(i for i, line in enumerate(below) if f"pod {namespace}/on-two " in line)
    assert not any(line.startswith("node ") for line in below[:ours]), status.stderr


def test_a_node_2_pod_reaches_node_1_pods_services_dns_apiserver_and_kafka(
    two_nodes: devstack.StackState, kube: Kube, namespace: str
) -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 8080}]},
    }
    _apply(kube, namespace, _serve("web", "rillet-node"), service, _serve("probe", NODE_2))
    web = _running_pod(kube, namespace, "web")
    probe = _running_pod(kube, namespace, "probe")
    environment = two_nodes.environment()
    args = {
        "pod_ip": web["status"]["podIP"],
        "service_dns": f"web.{namespace}.svc.cluster.local",
        "kafka": two_nodes.kafka_bootstrap,
        "s3": environment.get("RILLET_S3_ENDPOINT"),
        "registry": environment.get("RILLET_SCHEMA_REGISTRY_URL"),
    }

    checked = kube.kubectl(
        "exec", "-n", namespace, "probe", "--", "python3", "-c", CHECKS, json.dumps(args)
    )
    back = kube.kubectl(
        "exec",
        "-n",
        namespace,
        "web",
        "--",
        "python3",
        "-c",
        "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).status)",
        f"http://{probe['status']['podIP']}:8080/",
    )

    assert web["spec"]["nodeName"] == "rillet-node"
    assert probe["spec"]["nodeName"] == NODE_2
    results = {line.split()[1]: line for line in checked.stdout.splitlines()}
    expected = ["pod-ip", "dns", "service", "apiserver", "kafka"]
    expected += ["object-store"] * bool(args["s3"]) + ["schema-registry"] * bool(args["registry"])
    assert sorted(results) == sorted(expected), checked.stdout
    assert all(line.startswith("OK ") for line in results.values()), checked.stdout
    assert results["pod-ip"] == "OK pod-ip 200"
    assert results["apiserver"] == f"OK apiserver v{two_nodes.kubernetes_version}"
    if args["registry"]:
        assert results["schema-registry"] == "OK schema-registry 401"
    assert back.stdout.strip() == "200"


def test_node_2_stopped_as_a_crash_goes_not_ready_and_comes_back(
    two_nodes: devstack.StackState,
    kube: Kube,
    namespace: str,
    measurement: Callable[[str], None],
) -> None:
    refused = nodes.rillet("dev", "node", "stop", "rillet-node", timeout=60)
    assert refused.returncode == 1
    assert "rillet-node is node 1" in refused.stderr
    assert _ready(_node(kube, "rillet-node")) == "True"

    stopped_at = time.monotonic()
    stop = nodes.rillet("dev", "node", "stop", NODE_2, timeout=60)
    assert stop.returncode == 0, stop.stderr
    wait_for(
        lambda: _ready(_node(kube, NODE_2)) != "True",
        timeout=NOT_READY_DEADLINE,
        interval=1,
        what=f"{NODE_2} NotReady after its crash",
    )
    not_ready = time.monotonic() - stopped_at
    status = nodes.rillet("dev", "status", timeout=120)
    assert any(
        line.startswith(f"node {NODE_2} 10.99.2.2 Ready=") and line.endswith(" stopped")
        for line in status.stderr.splitlines()
    ), status.stderr

    started_at = time.monotonic()
    start = nodes.rillet("dev", "node", "start", NODE_2, timeout=300)
    assert start.returncode == 0, start.stderr
    wait_for(
        lambda: _ready(_node(kube, NODE_2)) == "True",
        timeout=READY_AGAIN_DEADLINE,
        interval=0.5,
        what=f"{NODE_2} Ready again",
    )
    ready_again = time.monotonic() - started_at
    _apply(kube, namespace, _serve("after", NODE_2))
    after = _running_pod(kube, namespace, "after")

    assert after["spec"]["nodeName"] == NODE_2
    measurement(
        f"NotReady {not_ready:.0f} s after the crash; Ready {ready_again:.1f} s after start"
    )


def test_node_2_s_kubelet_killed_alone_is_started_again(
    two_nodes: devstack.StackState, kube: Kube
) -> None:
    """As systemd restarts a node's kubelet: its anchor runs it again, and logs that it did."""
    layout = extranodes.layout_of(two_nodes.kubeconfig.parent, 2)
    pid_file = extranodes.pid_file(layout, "kubelet")
    killed = int(pid_file.read_text())
    os.kill(killed, signal.SIGKILL)

    def another_kubelet() -> int | None:
        pid = int(pid_file.read_text())
        return pid if pid != killed and Path(f"/proc/{pid}").exists() else None

    started = wait_for(another_kubelet, timeout=15, what=f"{NODE_2}'s kubelet started again")
    assert f"--hostname-override={NODE_2}" in Path(f"/proc/{started}/cmdline").read_text()
    log = (extranoderunning.logs_of(layout) / "kubelet.log").read_text()
    assert "rillet: kubelet exited (137); started again in 1 s" in log
    assert _ready(_node(kube, NODE_2)) == "True"
