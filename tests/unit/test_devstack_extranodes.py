"""The extra worker nodes' names, addresses and configuration, without starting anything.

Test plan:
- node N (2, 3) is `rillet-node-N` in netns `rillet-nN`, on the veth /30 10.99.N.0 (host .1,
  node .2), with pods in 10.244.(N-1).0/24 and kubelet's cgroup root /rillet-node-N; every
  node's ranges are apart from each other's and from node 1's, and inside the cluster range
  kube-proxy treats as local; nodes 1 and 4 are not extra nodes;
- the `ip` commands route the node's pods through its address and its default route through
  the host's end, in that order (the netns before the link moved into it);
- an extra node's kubelet keeps to its cgroup root, registers on its address with no taint,
  uses node 1's DNS; its CNI bridge and range, and kube-proxy's name, are its own, and every
  node's kube-proxy takes the whole cluster range as local; node 1's configuration is as
  before (no cgroupRoot, its own bridge and range);
- the anchor joins the node's pids and freezer cgroups before anything starts, binds every
  hardcoded path, starts kubelet only once the images are in, enters the netns with nsenter
  (never `ip netns exec`, which hides /sys/fs/cgroup) and a slave mount namespace;
- a recorded PID is the node's daemon only when its command line names both the daemon and
  the node's directory;
- the images' chart names come from the chart's appVersion and match what examples/*.yaml and
  the chart's values use; images missing from a node (absent or another digest) are found, and
  CRI's sha256 names are not copied.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
import yaml

from rillet_devstack import extranodes, images, importing, node, pki

REPO = Path(__file__).resolve().parents[2]
SERVING = pki.IssuedCertificate(Path("/pki/k.crt"), Path("/pki/k.key"))


def test_node_n_has_its_own_names_addresses_and_ranges() -> None:
    two, three = extranodes.extra_node(2), extranodes.extra_node(3)
    assert (two.spec.name, two.netns, two.host_link, two.node_link) == (
        "rillet-node-2",
        "rillet-n2",
        "rn2-host",
        "rn2-eth0",
    )
    assert (two.host_address, two.spec.address) == ("10.99.2.1", "10.99.2.2")
    assert (three.host_address, three.spec.address) == ("10.99.3.1", "10.99.3.2")
    assert [two.spec.pod_cidr, three.spec.pod_cidr] == ["10.244.1.0/24", "10.244.2.0/24"]
    assert two.cgroup_root == "/rillet-node-2"
    assert extranodes.index_of("rillet-node-3") == 3
    assert extranodes.index_of("rillet-node") is None


@pytest.mark.parametrize("index", [1, 4])
def test_only_nodes_2_and_3_are_extra(index: int) -> None:
    with pytest.raises(ValueError, match="extra nodes are 2 to 3"):
        extranodes.extra_node(index)


def test_ranges_are_apart_and_inside_the_cluster_range() -> None:
    cluster = ipaddress.ip_network(node.CLUSTER_CIDR)
    pods = [ipaddress.ip_network(node.POD_CIDR)]
    links = [ipaddress.ip_network(f"{node.NODE_ADDRESS}/32")]
    for index in (2, 3):
        extra = extranodes.extra_node(index)
        pods.append(ipaddress.ip_network(extra.spec.pod_cidr))
        link = ipaddress.ip_network(f"{extra.host_address}/30", strict=False)
        assert ipaddress.ip_address(extra.spec.address) in link
        links.append(link)
    assert all(p.subnet_of(cluster) for p in pods)  # type: ignore[arg-type]
    every = pods + links
    assert not any(a.overlaps(b) for i, a in enumerate(every) for b in every[i + 1 :])


def test_network_commands_route_pods_through_the_node() -> None:
    commands = extranodes.network_commands(extranodes.extra_node(2))
    assert commands[0] == ["ip", "netns", "add", "rillet-n2"]
    assert ["ip", "link", "set", "rn2-eth0", "netns", "rillet-n2"] in commands
    assert ["ip", "-n", "rillet-n2", "route", "add", "default", "via", "10.99.2.1"] in commands
    assert commands[-1] == [
        "ip",
        "route",
        "add",
        "10.244.1.0/24",
        "via",
        "10.99.2.2",
        "dev",
        "rn2-host",
    ]
    assert ["ip", "addr", "add", "10.99.2.1/30", "dev", "rn2-host"] in commands


def test_extra_kubelet_keeps_to_its_cgroup_root_and_node_1_dns() -> None:
    extra = extranodes.extra_node(2)
    layout = extranodes.layout_of(Path("/state"), 2)
    config = node.build_kubelet_config(
        layout, ca_cert=Path("/pki/ca.crt"), serving=SERVING, spec=extra.spec
    )
    first = node.build_kubelet_config(
        node.NodeLayout(Path("/state/node")), ca_cert=Path("/c"), serving=SERVING
    )
    assert config["cgroupRoot"] == "/rillet-node-2"
    assert config["address"] == "10.99.2.2"
    assert config["clusterDNS"] == [node.NODE_ADDRESS]
    assert config["containerRuntimeEndpoint"] == "unix:///state/node-2/containerd/containerd.sock"
    assert "registerWithTaints" not in config
    assert "cgroupRoot" not in first
    assert first["address"] == node.NODE_ADDRESS


def test_cni_and_kube_proxy_are_the_nodes_own() -> None:
    extra = extranodes.extra_node(3)
    layout = extranodes.layout_of(Path("/state"), 3)
    bridge = node.build_cni_config(layout, spec=extra.spec)["plugins"][0]
    first = node.build_cni_config(node.NodeLayout(Path("/state/node")))["plugins"][0]
    proxy = node.build_kube_proxy_config(Path("/kubeconfig"), spec=extra.spec)
    assert bridge["bridge"] == "rn3-pods"
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.244.2.0/24"}]]
    assert bridge["ipam"]["dataDir"] == "/state/node-3/cni/ipam"
    assert bridge["ipMasq"] is False
    assert (first["bridge"], first["ipam"]["ranges"]) == (
        node.POD_BRIDGE,
        [[{"subnet": node.POD_CIDR}]],
    )
    assert proxy["hostnameOverride"] == "rillet-node-3"
    assert proxy["clusterCIDR"] == "10.244.0.0/16"
    assert node.build_kube_proxy_config(Path("/k"))["clusterCIDR"] == "10.244.0.0/16"


def test_anchor_joins_its_cgroups_binds_paths_and_waits_for_images() -> None:
    extra = extranodes.extra_node(2)
    layout = extranodes.layout_of(Path("/state"), 2)
    lines = extranodes.build_anchor_script(
        extra,
        layout,
        kube_bin=Path("/bin/k8s"),
        network_policies_bin=Path("/cache/networkpolicies"),
        logs=Path("/state/node-2/logs"),
    ).splitlines()
    first_start = next(i for i, line in enumerate(lines) if line.startswith("keep containerd "))
    joins = [i for i, line in enumerate(lines) if "cgroup.procs" in line]
    assert lines[joins[0]] == "echo $$ > /sys/fs/cgroup/pids/rillet-node-2/system/cgroup.procs"
    assert lines[joins[1]] == "echo $$ > /sys/fs/cgroup/freezer/rillet-node-2/system/cgroup.procs"
    assert max(joins) < first_start
    binds = {line.split()[-1] for line in lines if line.startswith("mount --bind ")}
    assert binds == {str(p) for p in extranodes.PRIVATE_PATHS}
    assert "mount --bind /state/node-2/private/var-lib-kubelet /var/lib/kubelet" in lines
    wait = next(i for i, line in enumerate(lines) if "images-ready" in line)
    kubelet = next(i for i, line in enumerate(lines) if line.startswith("keep kubelet "))
    assert " /bin/k8s/kubelet --config=" in lines[kubelet]
    assert lines.index("keep() {") < first_start
    assert first_start < wait < kubelet
    assert "--hostname-override=rillet-node-2 --node-ip=10.99.2.2" in lines[kubelet]
    # The node's pods are guarded by a controller of its own, in its netns, and the packets
    # are steered to it before any pod can start.
    policies = next(i for i, line in enumerate(lines) if line.startswith("keep networkpolicies "))
    assert "-hostname-override=rillet-node-2" in lines[policies]
    assert "-kubeconfig=/state/node-2/config/networkpolicies.kubeconfig" in lines[policies]
    steering = next(i for i, line in enumerate(lines) if "-j NFQUEUE" in line)
    assert steering < first_start
    command = extranodes.enter_command(extra, Path("/s.sh"))
    assert command[:2] == ["nsenter", "--net=/run/netns/rillet-n2"]
    assert command[command.index("--propagation") + 1] == "slave"
    assert "exec" not in command


def test_a_recorded_pid_is_the_daemon_only_when_it_names_the_node() -> None:
    layout = extranodes.layout_of(Path("/state"), 2)
    kubelet = b"/cache/kubelet\0--config=/state/node-2/config/kubelet.yaml\0"
    assert extranodes.names_the_daemon(kubelet, daemon="kubelet", layout=layout)
    assert not extranodes.names_the_daemon(kubelet, daemon="containerd", layout=layout)
    other = b"/cache/kubelet\0--config=/state/node/config/kubelet.yaml\0"
    assert not extranodes.names_the_daemon(other, daemon="kubelet", layout=layout)


def test_chart_names_are_those_the_chart_and_examples_use() -> None:
    named = images.chart_references(images.CHART.read_text())
    values = yaml.safe_load((REPO / "charts" / "rillet" / "values.yaml").read_text())
    examples = {
        line.split("image:")[1].strip()
        for path in (REPO / "examples").glob("*.yaml")
        for line in path.read_text().splitlines()
        if "image: rillet/spark-runtime" in line
    }
    app_version = yaml.safe_load(images.CHART.read_text())["appVersion"]
    assert named["operator"] == f"docker.io/{values['image']['repository']}:{app_version}"
    assert examples == {named["runtime"].removeprefix("docker.io/")}


M = "application/vnd.oci.image.manifest.v1+json"
LISTING = f"""\
REF                             TYPE DIGEST     SIZE  PLATFORMS   LABELS
docker.io/rillet/operator:0.1.0 {M} sha256:aaa 1 MiB linux/amd64 -
localhost/rillet/operator:abc   {M} sha256:aaa 1 MiB linux/amd64 io.rillet.image-id=1
localhost/rillet/pause:3.10     {M} sha256:ppp 1 MiB linux/amd64 -
sha256:1234                     {M} sha256:aaa 1 MiB linux/amd64 -
"""


def test_images_missing_from_a_node_are_found() -> None:
    wanted = importing.named_images(LISTING)
    assert wanted == {
        "docker.io/rillet/operator:0.1.0": "sha256:aaa",
        "localhost/rillet/operator:abc": "sha256:aaa",
        "localhost/rillet/pause:3.10": "sha256:ppp",
    }
    present = {
        "localhost/rillet/pause:3.10": "sha256:ppp",
        "docker.io/rillet/operator:0.1.0": "sha256:old",
    }
    assert importing.missing_images(wanted, present) == [
        "docker.io/rillet/operator:0.1.0",
        "localhost/rillet/operator:abc",
    ]
    assert importing.missing_images(wanted, wanted) == []
