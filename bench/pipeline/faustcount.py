"""(c) the word count as a Faust worker counting into a Faust Table."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from bench.pipeline import settings

FAUST_APP = """
import os, re, time
import faust

TOPIC, N = os.environ["BENCH_TOPIC"], int(os.environ["BENCH_RECORDS"])
app = faust.App(os.environ["BENCH_APP"], broker="kafka://" + os.environ["BENCH_BOOTSTRAP"],
                store="memory://", topic_partitions=int(os.environ["BENCH_PARTITIONS"]),
                web_enabled=False)
lines = app.topic(TOPIC, value_type=bytes, value_serializer="raw")
counts = app.Table("counts", default=int)
state = {"n": 0, "t0": None}
split = re.compile("[^a-z0-9]+")

@app.agent(lines)
async def count(stream):
    async for line in stream:
        if state["t0"] is None:
            state["t0"] = time.monotonic()
        for word in split.split(line.decode().lower()):
            if word:
                counts[word] += 1
        state["n"] += 1
        if state["n"] >= N:
            with open(os.environ["BENCH_RESULT"], "w") as result:
                result.write(str(N / (time.monotonic() - state["t0"])))
            os._exit(0)
"""


def bench_faust(bootstrap: str, source: str, workdir: Path) -> float:
    """Records/s of a Faust worker counting words into a Faust Table."""
    module = workdir / "faust_wordcount.py"
    module.write_text(FAUST_APP)
    env = {
        **os.environ,
        "BENCH_TOPIC": source,
        "BENCH_RECORDS": str(settings.FAUST_RECORDS),
        "BENCH_APP": f"bench-faust-{uuid.uuid4().hex[:8]}",
        "BENCH_BOOTSTRAP": bootstrap,
        "BENCH_PARTITIONS": str(settings.PARTITIONS),
        "BENCH_RESULT": str(workdir / "faust-result"),
    }
    faust = Path(sys.executable).with_name("faust")
    result = subprocess.run(
        [
            str(faust),
            "-A",
            "faust_wordcount",
            "--datadir",
            str(workdir / uuid.uuid4().hex),
            "worker",
            "-l",
            "error",
        ],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    written = workdir / "faust-result"
    if not written.exists():
        raise RuntimeError(f"faust failed: {(result.stdout + result.stderr)[-3000:]}")
    rate = float(written.read_text())
    written.unlink()
    return rate
