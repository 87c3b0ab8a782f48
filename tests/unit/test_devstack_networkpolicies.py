"""The stack's NetworkPolicy steering: every new forwarded connection to the controller, and gone
with the node."""

from __future__ import annotations

import pytest

from rillet_devstack import hostcleanup, networkpolicies

pytestmark = pytest.mark.unit

# `iptables -t mangle -S` on the stack's host with the steering in place (kube-proxy's chains
# beside it), as printed on 2026-11-29.
MANGLE = """\
-P PREROUTING ACCEPT
-P INPUT ACCEPT
-P FORWARD ACCEPT
-P OUTPUT ACCEPT
-P POSTROUTING ACCEPT
-N KUBE-IPTABLES-HINT
-N KUBE-KUBELET-CANARY
-N KUBE-PROXY-CANARY
-N RILLET-NETWORK-POLICIES
-A FORWARD -j RILLET-NETWORK-POLICIES
-A RILLET-NETWORK-POLICIES -s 10.244.0.0/16 -m conntrack --ctstate NEW -j NFQUEUE \
--queue-num 100 --queue-bypass
""".replace("\\\n", "")


def test_new_forwarded_connections_go_to_the_controllers_queue_first() -> None:
    create, queue, jump = networkpolicies.steering_rules()
    assert create[-2:] == ["-N", networkpolicies.CHAIN]
    assert queue[queue.index("--ctstate") + 1] == "NEW"  # established flows stay in the kernel
    # What pods open, not what the host (the control plane, the tests) opens to them.
    assert queue[queue.index("-s") + 1] == "10.244.0.0/16"
    assert queue[queue.index("--queue-num") + 1] == str(networkpolicies.QUEUE)
    assert "--queue-bypass" in queue  # a restarting controller never cuts the stack off
    assert jump[jump.index("-I") + 1 :] == ["FORWARD", "1", "-j", networkpolicies.CHAIN]
    assert {rule[rule.index("-t") + 1] for rule in (create, queue, jump)} == {"mangle"}


def test_the_controller_guards_the_node_it_is_told() -> None:
    line = networkpolicies.command(
        networkpolicies.SOURCE / "bin", kubeconfig=networkpolicies.SOURCE / "k", node_name="n-2"
    )
    assert "-hostname-override=n-2" in line
    assert f"-nfqueue-id={networkpolicies.QUEUE}" in line


def test_down_removes_the_steering_with_the_nodes_other_chains() -> None:
    assert networkpolicies.CHAIN in hostcleanup.chains_to_remove(MANGLE)
    assert ["-D", "FORWARD", "-j", networkpolicies.CHAIN] in hostcleanup.jumps_to_remove(MANGLE)
