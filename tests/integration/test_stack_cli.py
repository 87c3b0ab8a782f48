"""`rillet dev` as a user runs it.

The shared stack is never stopped or restarted here: `up` and `down` run either against it in a
way that leaves it as it is (`up` of its own shape reuses it), or against a state directory of
the test's own (RILLET_STATE_DIR), where they find no stack or one recorded by the test.

Test plan:
- with go missing and nothing cached, `rillet dev up` exits non-zero with a one-line error
  naming go and how to get it, before building anything.
- with java missing, the same for java, even when every artefact is cached.
- `rillet dev up` while a stack runs reuses it and prints the environment to use.
- `--brokers` takes 1 to 3: `--brokers 3` is accepted (it gets as far as checking the tools),
  `--brokers 4` is a usage error; `up --help` and `down --help` say what they do.
- `rillet dev status` lists every process of the running stack with its pid as running, and
  where the apiserver and Kafka are; it exits 1, marking the process stopped, when one of them
  is not running (a recorded process whose start time does not match), and says so when no
  stack is recorded.
- `rillet dev env` prints the exports (with a node, the images' names as the chart and the
  examples give them too), and a shell that evaluates them reaches the stack's
  apiserver with the stack's kubectl; with no stack it fails saying how to start one.
- `rillet dev down` with no stack recorded stops nothing, says so, and exits 0.
- the free ports handed to a test's processes are never the same twice in one process, and
  bind on every address.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from rillet_devstack import processes, tools
from rillet_devstack import stack as devstack

RILLET = [sys.executable, "-m", "rillet.cli"]


def _path_with_only(tmp_path: Path, tools: list[str]) -> str:
    """A PATH holding just these tools (symlinked), so the others are missing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        found = shutil.which(tool)
        assert found, f"{tool} must exist on the test machine"
        (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


def _rillet(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RILLET, *args],
        env={**os.environ, "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


def test_missing_go_is_one_line_error(tmp_path: Path) -> None:
    result = _rillet(
        "dev",
        "up",
        "--no-node",  # else the missing node tools (containerd, ...) are named first
        env={
            "PATH": _path_with_only(tmp_path, ["java", "javac", "mvn"]),
            "RILLET_CACHE_DIR": str(tmp_path / "empty-cache"),
            "RILLET_STATE_DIR": str(tmp_path / "state"),
        },
    )
    assert result.returncode != 0
    lines = _error_lines(result.stderr)
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: missing on PATH: go (go: install Go")
    assert not (tmp_path / "empty-cache").exists()


def test_missing_java_is_one_line_error_even_when_cached(tmp_path: Path) -> None:
    result = _rillet(
        "dev",
        "up",
        "--no-node",
        env={
            "PATH": _path_with_only(tmp_path, ["go", "mvn"]),
            "RILLET_STATE_DIR": str(tmp_path / "state"),
        },
    )
    assert result.returncode != 0
    lines = _error_lines(result.stderr)
    assert len(lines) == 1, result.stderr
    assert "missing on PATH: java" in lines[0]
    assert "openjdk" in lines[0]


def _shape(stack: devstack.StackState) -> list[str]:
    """The options of `rillet dev up` that describe this stack (another shape restarts it)."""
    return [
        f"--brokers={stack.kafka_brokers}",
        "--node" if stack.node else "--no-node",
        "--object-store" if stack.object_store else "--no-object-store",
    ]


def test_up_reuses_running_stack(stack: devstack.StackState) -> None:
    result = _rillet("dev", "up", *_shape(stack), env={})
    assert result.returncode == 0, result.stderr
    assert "stack reused" in result.stderr
    assert f"export KUBECONFIG={stack.kubeconfig}" in result.stdout
    assert f"export RILLET_KAFKA_BOOTSTRAP={stack.kafka_bootstrap}" in result.stdout


def test_brokers_takes_one_to_three(tmp_path: Path) -> None:
    private = {
        "PATH": _path_with_only(tmp_path, ["java", "mvn"]),
        "RILLET_CACHE_DIR": str(tmp_path / "empty-cache"),
        "RILLET_STATE_DIR": str(tmp_path / "state"),
    }

    three = _rillet("dev", "up", "--brokers", "3", "--no-node", env=private)
    refused = _rillet("dev", "up", "--brokers", "4", "--no-node", env=private)

    assert three.returncode == 1, three.stderr  # past parsing: stopped at the missing go
    assert "missing on PATH: go" in three.stderr
    assert refused.returncode == 2, refused.stderr  # a usage error, before anything runs
    assert "Invalid value for '--brokers'" in refused.stderr
    assert not (tmp_path / "empty-cache").exists()


def test_up_and_down_say_what_they_do() -> None:
    up = _rillet("dev", "up", "--help", env={})
    down = _rillet("dev", "down", "--help", env={})

    assert up.returncode == down.returncode == 0
    assert "Provision what is missing, start the stack" in up.stdout
    assert "--brokers" in up.stdout
    assert "[1<=x<=3]" in up.stdout
    assert "--no-node" in up.stdout
    assert "Stop every process of the stack." in down.stdout


def test_status_lists_every_process_running(stack: devstack.StackState) -> None:
    result = _rillet("dev", "status", env={})

    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    for process in stack.processes:
        assert [process.name, "pid", str(process.pid), "running"] in [
            line.split() for line in lines
        ], result.stderr
    assert f"apiserver {stack.apiserver}  kafka {stack.kafka_bootstrap}" in lines
    if stack.node is not None:
        assert f"node {stack.node.name} {stack.node.address} Ready=True" in lines


def test_status_marks_a_process_that_is_not_running(
    stack: devstack.StackState, tmp_path: Path
) -> None:
    # The running stack's record, one process made unrecognisable (a recycled pid's start time
    # differs): to `status` that process is not running. The stack itself is not touched.
    record = stack.model_copy(deep=True)
    gone = record.processes[-1]
    record.processes[-1] = gone.model_copy(update={"start_ticks": gone.start_ticks + 1})
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "state.json").write_text(record.model_dump_json())

    result = _rillet("dev", "status", env={"RILLET_STATE_DIR": str(tmp_path / "state")})

    assert result.returncode == 1, result.stderr
    names = {p.name for p in stack.processes}
    lines = [line.split() for line in result.stderr.splitlines()[:-1]]
    marks = {line[0]: line[-1] for line in lines if line[0] in names}
    assert marks == {
        p.name: "stopped" if p.name == gone.name else "running" for p in stack.processes
    }
    assert all(processes.is_alive(p) for p in stack.processes)


def test_env_prints_the_exports_a_shell_uses(stack: devstack.StackState) -> None:
    result = _rillet("dev", "env", env={})

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"export KUBECONFIG={stack.kubeconfig}",
        f"export RILLET_KAFKA_BOOTSTRAP={stack.kafka_bootstrap}",
        # The names the chart and examples/*.yaml give the project's images (their appVersion).
        *(
            [
                "export RILLET_OPERATOR_IMAGE=docker.io/rillet/operator:0.1.0",
                "export RILLET_RUNTIME_IMAGE=docker.io/rillet/spark-runtime:0.1.0",
            ]
            if stack.node is not None
            else []
        ),
        # The object store's endpoint, bucket and key, when the stack runs one (make test's does).
        *(
            [f"export {k}={v}" for k, v in stack.object_store.environment().items()]
            if stack.object_store is not None
            else []
        ),
        # The schema registry's URL and user, when the stack runs one (make test's does).
        *(
            [f"export {k}={v}" for k, v in stack.schema_registry.environment().items()]
            if stack.schema_registry is not None
            else []
        ),
    ]
    shell = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG",)}
    script = f'eval "$({" ".join(RILLET)} dev env)" && "{tools.kubectl()}" get --raw /version'
    used = subprocess.run(
        ["bash", "-c", script],
        env=shell,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert used.returncode == 0, used.stderr
    assert f'"gitVersion": "v{stack.kubernetes_version}"' in used.stdout


def test_without_a_stack_status_and_env_fail_and_down_stops_nothing(
    stack: devstack.StackState, tmp_path: Path
) -> None:
    nowhere = {"RILLET_STATE_DIR": str(tmp_path / "state")}

    status = _rillet("dev", "status", env=nowhere)
    env = _rillet("dev", "env", env=nowhere)
    down = _rillet("dev", "down", env=nowhere)

    assert (status.returncode, status.stderr.strip()) == (1, "no stack recorded")
    assert env.returncode == 1
    assert env.stdout == ""
    assert "no stack is running: start one with `rillet dev up`" in env.stderr
    assert (down.returncode, down.stderr.strip()) == (0, "stopped: nothing was running")
    assert all(processes.is_alive(p) for p in stack.processes)


def test_free_ports_are_never_handed_out_twice_and_bind_on_every_address() -> None:
    """A port a test was handed and has not bound yet is never handed to another of its
    processes (the kernel gives a port released a moment ago out again)."""
    ports = [processes.free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    for port in ports[-20:]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("0.0.0.0", port))
