"""What the host's files and commands print, parsed (pure): a process's /proc/<pid>/stat, the
mounts of /proc/self/mountinfo, the links of `ip -o link`, the names of `ip netns list` and the
rules of `*tables-save`. tests/hostsnapshot.py reads the host with them; unit-tested in
tests/unit/test_hostsnapshot.py.
"""

from __future__ import annotations

import re

# Kernel threads carry this flag in /proc/<pid>/stat (PF_KTHREAD).
_KERNEL_THREAD = 0x00200000
_COUNTERS = re.compile(r"\s*\[\d+:\d+\]")


def parse_stat(text: str) -> tuple[int, int, bool, bool, int]:
    """(ppid, session, kernel thread, zombie, start time) from /proc/<pid>/stat; the command
    name, in parentheses, may itself hold spaces and parentheses."""
    fields = text[text.rindex(")") + 2 :].split()
    flags = int(fields[6])
    return (
        int(fields[1]),
        int(fields[3]),
        bool(flags & _KERNEL_THREAD),
        fields[0] == "Z",
        int(fields[19]),
    )


def parse_mountinfo(text: str) -> tuple[str, ...]:
    """Each mount as `<point> (<type> <source>, root <root>)`: what a mount is, without its
    ids (which a remount changes)."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        dash = fields.index("-")
        point = _unescape(fields[4])
        mounts.append(f"{point} ({fields[dash + 1]} {fields[dash + 2]}, root {fields[3]})")
    return tuple(mounts)


def _unescape(path: str) -> str:
    # /proc escapes space, tab, newline and backslash in paths as octal.
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def parse_links(text: str) -> frozenset[str]:
    """Link names from `ip -o link show` (`3: veth1@if2: <...>` is `veth1`)."""
    names = set()
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[0].strip().isdigit():
            names.add(parts[1].strip().split("@")[0])
    return frozenset(names)


def parse_netns_list(text: str) -> frozenset[str]:
    """Names from `ip netns list` (`cni-1 (id: 0)` is `cni-1`)."""
    return frozenset(line.split()[0] for line in text.splitlines() if line.strip())


def parse_rules(family: str, text: str) -> tuple[str, ...]:
    """The lines of `<family>-save` output, each as `<family> <table>: <line>`: chains with their
    policies and rules, without counters (they change with every packet), comments (a date) or
    table framing."""
    table = ""
    rules = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or line == "COMMIT":
            continue
        if line.startswith("*"):
            table = line[1:]
            continue
        if line.startswith("["):  # a rule with its counters (`-c`): `[12:345] -A ...`
            line = line.split("]", 1)[1].strip()
        line = _COUNTERS.sub("", line) if line.startswith(":") else line
        rules.append(f"{family} {table}: {line}")
    return tuple(rules)
