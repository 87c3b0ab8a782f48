"""The pipeline benchmark's settings: what the command line chooses (a frozen `Settings`,
passed down to every benchmark) and the fixed shape of the input and of the runs."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RECORDS = 2_000_000
PARTITIONS = 4
MAX_OFFSETS = 250_000
FAUST_RECORDS = 20_000
REPEATS = 3
FORMATS_MASTERS = ("local[1]", "local[2]")  # `--only formats`: records/s per core on each
FORMATS_BATCHES = 5  # at least, so that a small --records still has batches after the first
TRIGGER_MS = 100
LATENCY_SECONDS = 20
LATENCY_RATE = 100  # records per second
WORDS = [f"word{n}" for n in range(2_000)]
SPLIT = re.compile("[^a-z0-9]+")


@dataclasses.dataclass(frozen=True)
class Settings:
    """What `--records` and `--repeats` chose: input lines, and runs per figure."""

    records: int = RECORDS
    repeats: int = REPEATS
