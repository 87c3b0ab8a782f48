"""`python -m rillet.cli`: the `rillet` command line, as tests, bench and the local stack run it."""

from __future__ import annotations

from rillet import cli

if __name__ == "__main__":
    cli.app()
