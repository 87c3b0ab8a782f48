"""The Spark driver's entry point in a pod: `python -m rillet.runtime RUN_SPEC.json`.

The operator resolves the App and the Topics and Tables it names into a run spec
(`rillet.driverapi.runspecs.RunSpec`), mounts it as JSON, and starts this module through
spark-submit, which sets the master, the jars and the deploy settings; the App's own Spark conf
comes from the run spec. Metrics are served on all interfaces for Prometheus to scrape. SIGTERM
(a pod being deleted or rolled) stops the queries at a batch boundary; the exit code is 1 when a
query failed.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from rillet.driverapi import runspecs, wiring


def main(argv: list[str] | None = None) -> int:
    """Run the App of the run spec file until it ends, fails, or is stopped."""
    parser = argparse.ArgumentParser(prog="python -m rillet.runtime", description=__doc__)
    parser.add_argument("spec", type=Path, help="the run spec, as JSON")
    parser.add_argument("--metrics-host", default="0.0.0.0")  # scraped from outside the pod
    parser.add_argument("--metrics-port", type=int, default=wiring.METRICS_PORT)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    spec = runspecs.parse(args.spec.read_text(encoding="utf-8"), source=str(args.spec))

    from rillet.runtime.driver import driving

    options = driving.RunOptions(metrics_host=args.metrics_host, metrics_port=args.metrics_port)
    try:
        driving.run(spec, options)
    except driving.QueryFailedError as error:
        logging.getLogger("rillet.runtime").error("%s", error)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
