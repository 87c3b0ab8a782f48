"""`rillet dev` as a user runs it.

Test plan:
- with go missing and nothing cached, `rillet dev up` exits non-zero with a one-line error
  naming go and how to get it, before building anything.
- with java missing, the same for java, even when every artefact is cached.
- `rillet dev up` while a stack runs reuses it and prints the environment to use.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from rillet.devstack import stack as devstack

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
        env={**os.environ, **env},
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
        env={
            "PATH": _path_with_only(tmp_path, ["java", "mvn"]),
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


def test_up_reuses_running_stack(stack: devstack.StackState) -> None:
    result = _rillet("dev", "up", env={})
    assert result.returncode == 0, result.stderr
    assert "stack reused" in result.stderr
    assert f"export KUBECONFIG={stack.kubeconfig}" in result.stdout
    assert f"export RILLET_KAFKA_BOOTSTRAP={stack.kafka_bootstrap}" in result.stdout
