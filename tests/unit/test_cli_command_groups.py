"""The `rillet` command line adds the development stack's `rillet dev` only where it is installed.

Test plan:
- with rillet_devstack installed (a dev install), `rillet dev` is a command group of rillet.cli;
- with it absent (as in the images, whose pyproject.toml still declares its entry point),
  rillet.cli loads without it and keeps its own groups.
"""

from __future__ import annotations

import subprocess
import sys

GROUPS = "import rillet.cli; print(*sorted(g.name for g in rillet.cli.app.registered_groups))"


def _groups(*, without_devstack: bool) -> list[str]:
    hide = "import sys; sys.modules['rillet_devstack'] = None; " if without_devstack else ""
    result = subprocess.run(
        [sys.executable, "-c", hide + GROUPS],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_rillet_dev_is_there_with_the_devstack_installed() -> None:
    assert {"dev", "operator", "crds"} <= set(_groups(without_devstack=False))


def test_rillet_loads_without_the_devstack_and_has_no_dev() -> None:
    groups = _groups(without_devstack=True)
    assert "dev" not in groups
    assert {"operator", "crds"} <= set(groups)
