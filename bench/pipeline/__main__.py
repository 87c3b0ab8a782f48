"""The pipeline benchmark's command line: `python -m bench.pipeline [--only ...]`, and the
`spark-worker` subcommand the benchmarks spawn (sparkworker)."""

from __future__ import annotations

import argparse

import bench.pipeline
from bench.pipeline import (
    coldstart,
    delivery,
    feeding,
    formats,
    idle,
    latency,
    settings,
    sparkworker,
    throughput,
)


def parse_args() -> argparse.Namespace:
    doc = bench.pipeline.__doc__ or ""
    parser = argparse.ArgumentParser(
        prog="python -m bench.pipeline", description=doc.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command")
    worker = sub.add_parser("spark-worker")
    for option in (
        "--bootstrap",
        "--master",
        "--source",
        "--target",
        "--checkpoint",
        "--trigger",
        "--partitions",
    ):
        worker.add_argument(option, required=True)
    worker.add_argument("--stateless", action="store_true")
    worker.add_argument("--hand", action="store_true")
    worker.add_argument("--delivery", choices=["AtLeastOnce", "ExactlyOnce"])
    worker.add_argument("--format", choices=["json", "avro", "protobuf", "string"])
    worker.add_argument("--max-offsets", type=int, help="records per batch (MAX_OFFSETS)")
    parser.add_argument("--records", type=int, default=settings.RECORDS, help="input lines")
    parser.add_argument("--repeats", type=int, default=settings.REPEATS, help="runs per figure")
    parser.add_argument(
        "--only",
        choices=["throughput", "formats", "latency", "delivery", "coldstart", "idle"],
        help="one part only",
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.command == "spark-worker":
        sparkworker.spark_worker(args)
        return
    config = settings.Settings(records=args.records, repeats=args.repeats)
    run_benchmark(config=config, only=args.only)


def run_benchmark(*, config: settings.Settings, only: str | None = None) -> None:
    bootstrap = feeding.bootstrap_servers()
    try:
        if only in (None, "throughput"):
            throughput.throughput(bootstrap, config=config)
        if only in (None, "formats"):
            formats.formats(bootstrap, config=config)
        if only in (None, "delivery"):
            delivery.delivery(bootstrap, config=config)
        if only in (None, "coldstart"):
            coldstart.cold_starts(bootstrap, config=config)
        if only in (None, "latency"):
            latency.report_latency(*latency.latencies(bootstrap, config=config), config=config)
        if only in (None, "idle"):
            idle.idle_costs(bootstrap, config=config)
    finally:
        feeding.delete_bench_topics(bootstrap)


if __name__ == "__main__":
    main()
