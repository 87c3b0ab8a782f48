"""The worker node's configuration and teardown parsing, without starting anything.

Test plan:
- kubelet, kube-proxy, containerd and CNI settings carry the fixes NODE.md records (cgroupfs on
  cgroup v1, no image GC, no negative oom_score_adj, no masquerading, no sysctl changes);
- the default StorageClass is local-path's and the only default;
- the kubelet's disk floor is an amount (a percentage of these machines' shared 252 GB trips
  with GBs free); what keeps the node from taking pods is named, with the fix for a full disk;
  `up` refuses a filesystem short of what the node needs; Pending pods that neither the
  scheduler nor the kubelet acted on for a minute are named with the one they wait for;
- teardown finds exactly the node's iptables chains and the jumps into them, and the mounts
  under the node's directories (deepest first, escaped paths decoded);
- a new `up` empties the state directory but keeps containerd's image store, only when the
  last `down` released it (no container left), and never the files CRI kept for sandboxes;
  a store no node of the new stack starts stays released through any number of `up`s; a removed
  node keeps its logs until the next `up`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rillet_devstack import hostcleanup, node, nodechecking, noderunning, packages, pki

LAYOUT = node.NodeLayout(Path("/state/node"))


def test_kubelet_fits_this_machine() -> None:
    config = node.build_kubelet_config(
        LAYOUT,
        ca_cert=Path("/pki/ca.crt"),
        serving=pki.IssuedCertificate(Path("/pki/k.crt"), Path("/pki/k.key")),
    )
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["failCgroupV1"] is False
    # Imported images cannot be pulled again: kubelet must never collect them.
    assert config["imageGCHighThresholdPercent"] == 100
    assert config["clusterDNS"] == [node.NODE_ADDRESS]
    assert config["address"] == node.NODE_ADDRESS
    assert config["authentication"]["anonymous"]["enabled"] is False
    assert config["containerRuntimeEndpoint"] == "unix:///state/node/containerd/containerd.sock"


def test_the_kubelet_evicts_on_free_bytes_not_on_a_share_of_the_disk() -> None:
    config = node.build_kubelet_config(
        LAYOUT,
        ca_cert=Path("/pki/ca.crt"),
        serving=pki.IssuedCertificate(Path("/pki/k.crt"), Path("/pki/k.key")),
    )
    floors = config["evictionHard"]
    assert floors["nodefs.available"] == floors["imagefs.available"] == "1Gi"


def _node(conditions: dict[str, str], taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    listed = [
        {"type": kind, "status": status, "message": f"kubelet says {kind}={status}"}
        for kind, status in conditions.items()
    ]
    return {"spec": {"taints": taints or []}, "status": {"conditions": listed}}


def test_a_healthy_node_has_nothing_keeping_pods_waiting() -> None:
    healthy = _node({"Ready": "True", "DiskPressure": "False", "MemoryPressure": "False"})
    assert nodechecking.why_pods_wait(healthy) == []


def test_disk_pressure_is_named_with_its_taint_and_what_to_free() -> None:
    taint = {"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"}
    reasons = nodechecking.why_pods_wait(_node({"Ready": "True", "DiskPressure": "True"}, [taint]))
    assert len(reasons) == 2
    assert reasons[0].startswith("DiskPressure: kubelet says DiskPressure=True")
    assert "under 1Gi free" in reasons[0]
    assert "df -h ~/.local/state/rillet" in reasons[0]
    assert reasons[1] == "taint node.kubernetes.io/disk-pressure:NoSchedule"


def test_a_node_not_ready_or_short_of_memory_is_named() -> None:
    reasons = nodechecking.why_pods_wait(_node({"Ready": "False", "MemoryPressure": "True"}))
    assert reasons == [
        "Ready=False: kubelet says Ready=False",
        "MemoryPressure: kubelet says MemoryPressure=True",
    ]
    assert nodechecking.why_pods_wait({"status": {}}) == ["Ready=Unknown"]


def test_a_prefer_no_schedule_taint_keeps_no_pod_waiting() -> None:
    soft = {"key": "example.com/soft", "effect": "PreferNoSchedule"}
    assert nodechecking.why_pods_wait(_node({"Ready": "True"}, [soft])) == []


def test_up_refuses_a_filesystem_with_less_free_than_the_node_needs(tmp_path: Path) -> None:
    assert nodechecking.too_little_disk(tmp_path, minimum=1) is None
    short = nodechecking.too_little_disk(tmp_path, minimum=2**62)
    assert short is not None
    assert f"the filesystem of {tmp_path}" in short
    assert "DiskPressure" in short


NOW = datetime(2026, 11, 27, 8, 0, tzinfo=UTC)


def _pod(
    name: str,
    age_s: int,
    *,
    node_name: str = "",
    scheduled: str | None = None,
    containers: bool = False,
) -> dict[str, Any]:
    created = (NOW - timedelta(seconds=age_s)).isoformat().replace("+00:00", "Z")
    status: dict[str, Any] = {"phase": "Pending", "conditions": []}
    if scheduled:
        status["conditions"].append({"type": "PodScheduled", "status": scheduled})
    if containers:
        status["containerStatuses"] = [{"state": {"waiting": {"reason": "ContainerCreating"}}}]
    return {
        "metadata": {"namespace": "ns", "name": name, "creationTimestamp": created},
        "spec": {"nodeName": node_name} if node_name else {},
        "status": status,
    }


def test_pods_nobody_acted_on_for_a_minute_are_named_with_who_they_wait_for() -> None:
    pods = [
        _pod("unseen", 90),
        _pod("just-made", 20),
        _pod("unplaceable", 90, scheduled="False"),
        _pod("never-started", 90, node_name=node.NODE_NAME, scheduled="True"),
        _pod("creating", 90, node_name=node.NODE_NAME, scheduled="True", containers=True),
    ]
    assert nodechecking.unattended_pods(pods, now=NOW) == [
        "ns/unseen (the scheduler)",
        "ns/never-started (the kubelet)",
    ]


def test_containerd_never_asks_for_a_negative_oom_score() -> None:
    text = node.build_containerd_config(LAYOUT, sandbox_image="localhost/pause:1")
    assert "restrict_oom_score_adj = true" in text
    assert 'sandbox_image = "localhost/pause:1"' in text
    assert 'conf_dir = "/state/node/cni/net.d"' in text


def test_pod_network_does_not_masquerade_or_chain_loopback() -> None:
    config = node.build_cni_config(LAYOUT)
    kinds = [plugin["type"] for plugin in config["plugins"]]
    assert kinds == ["bridge", "portmap"]
    bridge = config["plugins"][0]
    assert bridge["ipMasq"] is False
    assert bridge["ipam"]["ranges"] == [[{"subnet": node.POD_CIDR}]]


def test_kube_proxy_changes_no_sysctl() -> None:
    config = node.build_kube_proxy_config(Path("/kubeconfig"))
    assert config["conntrack"]["maxPerCore"] == 0
    assert config["conntrack"]["min"] == 0
    assert config["iptables"]["localhostNodePorts"] is False


def test_local_path_is_the_one_default_storage_class() -> None:
    objects = node.build_local_path_objects(helper_image="img:1", volumes=Path("/v"))
    classes = [o for o in objects if o["kind"] == "StorageClass"]
    assert len(classes) == 1
    assert classes[0]["provisioner"] == node.LOCAL_PATH_PROVISIONER_NAME
    assert classes[0]["metadata"]["annotations"] == {
        "storageclass.kubernetes.io/is-default-class": "true"
    }
    config_map = next(o for o in objects if o["kind"] == "ConfigMap")
    assert '"/v"' in config_map["data"]["config.json"]
    assert "img:1" in config_map["data"]["helperPod.yaml"]


IPTABLES_S = """\
-P INPUT ACCEPT
-P FORWARD ACCEPT
-N KUBE-FIREWALL
-N KUBE-SERVICES
-N DOCKER-USER
-A INPUT -j KUBE-FIREWALL
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A FORWARD -j DOCKER-USER
-A KUBE-FIREWALL -d 127.0.0.0/8 -j DROP
"""


def test_teardown_removes_only_the_nodes_chains() -> None:
    assert hostcleanup.chains_to_remove(IPTABLES_S) == ["KUBE-FIREWALL", "KUBE-SERVICES"]
    assert hostcleanup.jumps_to_remove(IPTABLES_S) == [
        ["-D", "INPUT", "-j", "KUBE-FIREWALL"],
        [
            "-D",
            "FORWARD",
            "-m",
            "comment",
            "--comment",
            "kubernetes forwarding rules",
            "-j",
            "KUBE-FORWARD",
        ],
    ]


MOUNTS = """\
overlay / overlay rw 0 0
tmpfs /state/node/kubelet/pods/a/volumes/kube-api-access tmpfs rw 0 0
shm /run/containerd/io.containerd.grpc.v1.cri/sandboxes/x/shm tmpfs rw 0 0
tmpfs /state/node/kubelet tmpfs rw 0 0
tmpfs /state/nodeling tmpfs rw 0 0
tmpfs /state/node/with\\040space tmpfs rw 0 0
"""


def test_teardown_unmounts_deepest_first_under_the_node_only() -> None:
    found = hostcleanup.mounts_under(MOUNTS, [Path("/state/node"), Path("/run/containerd")])
    assert found[0] == "/state/node/kubelet/pods/a/volumes/kube-api-access"
    assert set(found) == {
        "/state/node/kubelet/pods/a/volumes/kube-api-access",
        "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/x/shm",
        "/state/node/kubelet",
        "/state/node/with space",
    }


def test_only_packages_without_their_files_are_missing(tmp_path: Path) -> None:
    (tmp_path / "present").touch()
    wanted = {"here": str(tmp_path / "present"), "gone": str(tmp_path / "absent")}
    assert packages.missing_packages(wanted) == ["gone"]


def _last_stack(root: Path, *, released: bool, name: str = "node") -> node.NodeLayout:
    """A state directory as a stack leaves it: etcd's data, a node's image, CRI's sandbox
    files, the node's kubelet files."""
    layout = node.NodeLayout(root / name)
    (root / "etcd").mkdir(parents=True, exist_ok=True)
    (root / "etcd" / "db").write_text("cluster")
    (layout.root / "kubelet").mkdir(parents=True)
    (layout.root / "kubelet.pid").write_text("1")
    blob = layout.containerd_root / "io.containerd.content.v1.content" / "blobs" / "sha256" / "ab"
    blob.parent.mkdir(parents=True)
    blob.write_text("layer")
    sandbox = layout.containerd_root / "io.containerd.grpc.v1.cri" / "sandboxes" / "s1" / "hosts"
    sandbox.parent.mkdir(parents=True)
    sandbox.write_text("10.0.0.1 pod")
    if released:
        layout.image_store_released.touch()
    return layout


def test_up_keeps_the_image_store_a_clean_down_released(tmp_path: Path) -> None:
    root = tmp_path / "state"
    layout = _last_stack(root, released=True)

    noderunning.empty_state_dir(root)

    blob = layout.containerd_root / "io.containerd.content.v1.content" / "blobs" / "sha256" / "ab"
    assert blob.read_text() == "layer"
    assert not (layout.containerd_root / "io.containerd.grpc.v1.cri").exists()
    assert not (root / "etcd").exists()
    assert layout.image_store_released.exists()  # until its containerd starts
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]


def test_up_empties_an_image_store_no_down_released(tmp_path: Path) -> None:
    root = tmp_path / "state"
    _last_stack(root, released=False)

    noderunning.empty_state_dir(root)

    assert not root.exists()


def test_up_keeps_each_nodes_released_image_store_and_empties_the_others(tmp_path: Path) -> None:
    root = tmp_path / "state"
    first = _last_stack(root, released=True)
    second = _last_stack(root, released=True, name="node-2")
    third = _last_stack(root, released=False, name="node-3")  # crashed: never released

    noderunning.empty_state_dir(root)

    for kept in (first, second):
        blob = kept.containerd_root / "io.containerd.content.v1.content" / "blobs" / "sha256"
        assert (blob / "ab").read_text() == "layer"
        assert not (kept.containerd_root / "io.containerd.grpc.v1.cri").exists()
        assert not (kept.root / "kubelet").exists()
    assert not third.root.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]


def test_an_extra_nodes_image_store_outlives_one_node_stacks_until_its_node_starts(
    tmp_path: Path,
) -> None:
    root = tmp_path / "state"
    second = _last_stack(root, released=True, name="node-2")
    blob = second.containerd_root / "io.containerd.content.v1.content" / "blobs" / "sha256"

    for _ in range(2):  # two `up`s of one node (and their `down`s) in which node 2 never ran
        noderunning.empty_state_dir(root)
    assert (blob / "ab").read_text() == "layer"

    noderunning.claim_image_store(second)  # node 2 starts: a `down` must release it again
    noderunning.empty_state_dir(root)
    assert not root.exists()


def test_a_removed_node_keeps_only_its_released_image_store(tmp_path: Path) -> None:
    root = tmp_path / "state"
    released = _last_stack(root, released=True, name="node-2")
    crashed = _last_stack(root, released=False, name="node-3")

    noderunning.remove_but_the_image_store(released)
    noderunning.remove_but_the_image_store(crashed)

    assert sorted(p.name for p in released.root.iterdir()) == ["containerd"]
    assert sorted(p.name for p in released.containerd.iterdir()) == sorted(
        [released.containerd_root.name, released.image_store_released.name]
    )
    assert sorted(p.name for p in released.containerd_root.iterdir()) == [
        "io.containerd.content.v1.content"
    ]
    assert not crashed.root.exists()


def test_a_removed_node_keeps_its_logs_until_the_next_up(tmp_path: Path) -> None:
    root = tmp_path / "state"
    released = _last_stack(root, released=True, name="node-2")
    crashed = _last_stack(root, released=False, name="node-3")
    for layout in (released, crashed):
        (layout.root / "logs").mkdir()
        (layout.root / "logs" / "kubelet.log").write_text("why it failed")

    noderunning.remove_but_the_image_store(released, logs=released.root / "logs")
    noderunning.remove_but_the_image_store(crashed, logs=crashed.root / "logs")

    assert sorted(p.name for p in released.root.iterdir()) == ["containerd", "logs"]
    assert sorted(p.name for p in crashed.root.iterdir()) == ["logs"]
    assert (crashed.root / "logs" / "kubelet.log").read_text() == "why it failed"
    noderunning.empty_state_dir(root)
    assert not (released.root / "logs").exists()
    assert not crashed.root.exists()
