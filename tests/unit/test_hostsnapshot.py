"""The host snapshot taken around `rillet dev up`/`down`, compared without reading any host.

Test plan:
- two snapshots of the same host differ in nothing; neither do the noise of a busy machine:
  packet counters, the run's own processes (pytest, its workers, their commands), the kernel's
  threads, zombies, a test's processes (session_leftovers' business) and another activity's
  processes in a cgroup and namespaces of its own;
- a process is left behind when it is new (a reused pid with a new start time is new) and the
  run's doing: in a session of a stack's process (even below pytest, or marked as a test's),
  naming the stack's state or cache, in the run's cgroup, or in a container's namespaces;
- a new mount (a second one on the same point too), link, named network namespace, network
  namespace a process is in, iptables rule or user chain, a built-in chain's policy that changed,
  and a sysctl whose value changed are left behind, one line each naming it; a built-in chain that
  appeared accepting everything, and a sysctl that appeared with a new link, are not;
- the parsers (tests/hostparsing.py) read the kernel's and the tools' formats: /proc/<pid>/stat
  with a command name holding spaces and parentheses, mountinfo with escaped paths,
  `ip -o link`, `ip netns list`, `iptables-save` with and without counters.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tests import hostparsing, hostsnapshot
from tests.hostsnapshot import Process, Snapshot, StackScope

PYTEST = 100
HOST_CGROUP = "4:memory:/\n0::/\n"
RUN_CGROUP = "4:memory:/run\n0::/\n"
HOST_NS = ("net:[1]", "mnt:[2]", "pid:[3]")
STACK = StackScope(
    sessions=frozenset({500}), state_dir="/root/.local/state/rillet/devstack", cache_dir="/c"
)
RULES = (
    "iptables filter: :INPUT ACCEPT",
    "iptables filter: :FORWARD ACCEPT",
    "iptables filter: -A INPUT -i lo -j ACCEPT",
)


def process(pid: int, **fields: Any) -> Process:
    """A process of the host's namespaces, in a cgroup other than the run's."""
    plain = Process(
        pid=pid,
        ppid=1,
        session=pid,
        started=1000 + pid,
        command=f"/usr/bin/thing-{pid}",
        cgroup=HOST_CGROUP,
        namespaces=HOST_NS,
    )
    return dataclasses.replace(plain, **fields)


BEFORE = Snapshot(
    reader=PYTEST,
    processes=(
        process(1, ppid=0, command="/sbin/init"),
        process(PYTEST, cgroup=RUN_CGROUP, command="python -m pytest"),
    ),
    mounts=("/ (ext4 /dev/vda, root /)", "/proc (proc proc, root /)"),
    links=frozenset({"lo", "eth0"}),
    rules=RULES,
    sysctls={"net.ipv4.ip_forward": "0", "vm.overcommit_memory": "0"},
)


def after(**changes: Any) -> Snapshot:
    return dataclasses.replace(BEFORE, **changes)


def with_processes(*added: Process) -> Snapshot:
    return after(processes=(*BEFORE.processes, *added))


def left(snapshot: Snapshot) -> list[str]:
    return hostsnapshot.left_behind(BEFORE, snapshot, stack=STACK)


def test_the_same_host_twice_leaves_nothing() -> None:
    assert left(BEFORE) == []
    assert left(after(processes=tuple(reversed(BEFORE.processes)))) == []


def test_the_runs_own_processes_are_not_left_behind() -> None:
    worker = process(200, ppid=PYTEST, session=1, cgroup=RUN_CGROUP, command="python -c xdist")
    command = process(201, ppid=200, session=1, cgroup=RUN_CGROUP, command="iptables-save")
    assert left(with_processes(worker, command)) == []
    # What started pytest, in its cgroup, is the run too (a snapshot's first taken later).
    shell = process(90, cgroup=RUN_CGROUP, command="bash")
    snapshot = with_processes(shell)
    pytest_below = dataclasses.replace(snapshot.processes[1], ppid=90)
    assert left(after(processes=(snapshot.processes[0], pytest_below, shell))) == []


def test_kernel_threads_and_zombies_are_not_left_behind() -> None:
    kernel = process(300, ppid=2, command="[kworker/0:1]", kernel=True, cgroup=RUN_CGROUP)
    zombie = process(301, command="[sleep]", zombie=True, cgroup=RUN_CGROUP)
    assert left(with_processes(kernel, zombie)) == []


def test_a_tests_process_is_left_to_session_leftovers() -> None:
    operator = process(400, cgroup=RUN_CGROUP, marked=True, command="rillet operator run")
    assert left(with_processes(operator)) == []


def test_another_activity_on_the_machine_is_not_the_runs() -> None:
    """A process of something else on a shared machine: its own cgroup, the host's namespaces."""
    build = process(410, command="/usr/local/go/bin/go build ./...")
    assert left(with_processes(build)) == []


def test_a_process_of_a_stack_session_is_left_behind_even_below_pytest() -> None:
    etcd = process(500, ppid=PYTEST, session=500, marked=True, command="etcd --data-dir=/x")
    helper = process(501, ppid=500, session=500, command="iptables -w -S")
    assert left(with_processes(etcd, helper)) == [
        "process 500 (parent 100): etcd --data-dir=/x",
        "process 501 (parent 500): iptables -w -S",
    ]


def test_a_process_naming_the_stack_is_left_behind() -> None:
    shim = process(
        510,
        marked=True,
        command=f"containerd-shim-runc-v2 -address {STACK.state_dir}/node/containerd.sock",
    )
    binary = process(511, command="/c/kubernetes-node/kubelet --config k.yaml")
    found = left(with_processes(shim, binary))
    assert [line.split(":")[0] for line in found] == [
        "process 510 (parent 1)",
        "process 511 (parent 1)",
    ]


def test_an_orphan_in_the_runs_cgroup_is_left_behind() -> None:
    orphan = process(520, cgroup=RUN_CGROUP, command="sleep infinity")
    assert left(with_processes(orphan)) == ["process 520 (parent 1): sleep infinity"]


def test_a_cgroup_the_run_shares_tells_nothing() -> None:
    """A CI agent (or a shell) in the run's cgroup before the run, whose loop starts a new
    `sleep` meanwhile: that cgroup was never the run's own (a CI run failed on this)."""
    agent = process(700, cgroup=RUN_CGROUP, command="bash /dev/fd/3")
    before = dataclasses.replace(BEFORE, processes=(*BEFORE.processes, agent))
    sleeping = process(701, ppid=700, session=700, cgroup=RUN_CGROUP, command="sleep 420")
    now = dataclasses.replace(before, processes=(*before.processes, sleeping))
    assert hostsnapshot.left_behind(before, now, stack=STACK) == []
    # What names the stack, or runs in a container's namespaces, is still found.
    kubelet = process(702, cgroup=RUN_CGROUP, command="/c/kubernetes-node/kubelet")
    pause = process(703, cgroup=RUN_CGROUP, command="/pause", namespaces=("net:[9]", "m", "p"))
    now = dataclasses.replace(before, processes=(*before.processes, kubelet, pause))
    assert hostsnapshot.left_behind(before, now, stack=STACK)[:2] == [
        "process 702 (parent 1): /c/kubernetes-node/kubelet",
        "process 703 (parent 1): /pause",
    ]


def test_a_container_and_its_network_namespace_are_left_behind() -> None:
    pause = process(530, command="/pause", namespaces=("net:[9]", "mnt:[8]", "pid:[7]"))
    assert left(with_processes(pause)) == [
        "process 530 (parent 1): /pause",
        "network namespace net:[9] (of process 530: /pause)",
    ]


def test_a_reused_pid_is_a_new_process() -> None:
    first = process(600, session=500, command="sleep 1")  # in a session of the stack
    again = dataclasses.replace(first, started=first.started + 1, command="sleep 1000")
    before = dataclasses.replace(BEFORE, processes=(*BEFORE.processes, first))
    assert hostsnapshot.left_behind(before, before, stack=STACK) == []
    assert hostsnapshot.left_behind(before, with_processes(again), stack=STACK) == [
        "process 600 (parent 1): sleep 1000"
    ]


def test_new_mounts_links_and_namespaces_are_left_behind() -> None:
    kubelet = "/var/lib/kubelet (tmpfs tmpfs, root /)"
    snapshot = after(
        mounts=(*BEFORE.mounts, kubelet, kubelet, "/proc (proc proc, root /)"),
        links=BEFORE.links | {"rillet0", "veth1"},
        netns=frozenset({"cni-1"}),
    )
    assert left(snapshot) == [
        "mount /proc (proc proc, root /)",
        f"mount {kubelet}",
        f"mount {kubelet}",
        "link rillet0",
        "link veth1",
        "network namespace cni-1",
    ]


def test_rules_user_chains_and_changed_policies_are_left_behind() -> None:
    snapshot = after(
        rules=(
            "iptables filter: :INPUT ACCEPT",
            "iptables filter: :FORWARD DROP",
            "iptables filter: :KUBE-FIREWALL -",
            "iptables filter: -A INPUT -i lo -j ACCEPT",
            "iptables filter: -A INPUT -j KUBE-FIREWALL",
            "ip6tables nat: :POSTROUTING ACCEPT",
        )
    )
    assert left(snapshot) == [
        "iptables filter: -A INPUT -j KUBE-FIREWALL",
        "iptables filter: :KUBE-FIREWALL -",
        "iptables filter FORWARD policy DROP (was ACCEPT)",
    ]


def test_a_built_in_chain_that_accepts_everything_is_not_left_behind() -> None:
    snapshot = after(rules=(*RULES, "iptables mangle: :PREROUTING ACCEPT"))
    assert left(snapshot) == []
    assert left(after(rules=(*RULES, "iptables mangle: :PREROUTING DROP"))) == [
        "iptables mangle PREROUTING policy DROP (was ACCEPT)"
    ]


def test_a_changed_sysctl_is_left_behind_and_a_new_one_is_not() -> None:
    snapshot = after(
        sysctls={
            "net.ipv4.ip_forward": "1",
            "vm.overcommit_memory": "0",
            "net.ipv4.conf.rillet0.forwarding": "1",
        }
    )
    assert left(snapshot) == ["sysctl net.ipv4.ip_forward=1 (was 0)"]


def test_stat_with_a_command_name_of_spaces_and_parentheses() -> None:
    fields = ["S", "7", "8", "9", "0", "-1", str(0x00200000)] + ["0"] * 12 + ["4242", "0"]
    text = f"123 (my (odd) name) {' '.join(fields)}"
    assert hostparsing.parse_stat(text) == (7, 9, True, False, 4242)
    zombie = text.replace(") S ", ") Z ").replace(str(0x00200000), "4194560")
    assert hostparsing.parse_stat(zombie) == (7, 9, False, True, 4242)


def test_mountinfo() -> None:
    text = (
        "22 1 0:21 / /proc rw,nosuid shared:5 - proc proc rw\n"
        "40 22 0:50 /netns /run/netns rw shared:7 master:1 - tmpfs none rw\n"
        r"41 22 8:1 / /mnt/with\040space rw - ext4 /dev/sda1 rw" + "\n"
    )
    assert hostparsing.parse_mountinfo(text) == (
        "/proc (proc proc, root /)",
        "/run/netns (tmpfs none, root /netns)",
        "/mnt/with space (ext4 /dev/sda1, root /)",
    )


def test_links_and_named_namespaces() -> None:
    links = (
        "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN\\    link/loopback\n"
        "7: veth1a2b@if2: <BROADCAST,MULTICAST,UP> mtu 1500 master rillet-pods\\    link/ether\n"
    )
    assert hostparsing.parse_links(links) == {"lo", "veth1a2b"}
    assert hostparsing.parse_netns_list("cni-1 (id: 0)\ncni-2\n\n") == {"cni-1", "cni-2"}


def test_iptables_save_without_counters_comments_or_framing() -> None:
    text = (
        "# Generated by iptables-nft-save v1.8.9 on Mon Jan  1 00:00:00 2024\n"
        "*nat\n"
        ":PREROUTING ACCEPT [12:3456]\n"
        ":KUBE-SERVICES - [0:0]\n"
        '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES\n'
        "[7:420] -A KUBE-SERVICES -j RETURN\n"
        "COMMIT\n"
        "# Completed on Mon Jan  1 00:00:00 2024\n"
    )
    assert hostparsing.parse_rules("ip6tables", text) == (
        "ip6tables nat: :PREROUTING ACCEPT",
        "ip6tables nat: :KUBE-SERVICES -",
        'ip6tables nat: -A PREROUTING -m comment --comment "kubernetes service portals" '
        "-j KUBE-SERVICES",
        "ip6tables nat: -A KUBE-SERVICES -j RETURN",
    )
