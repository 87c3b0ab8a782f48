"""A standby driver's warm-up, run in this process beside an App the test drives."""

from __future__ import annotations

import logging

from rillet.driverapi import runspecs
from rillet.runtime.driver import driving, warmup

from . import runtime_helpers as rt


class _Said(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def standby_warm_up(spec: runspecs.RunSpec) -> list[str]:
    """What the warm-up of a standby of the App (on its own plan, in this process's
    SparkSession) logged."""
    spark = driving.build_session(
        spec, driving.RunOptions(master="local[2]", spark_conf=rt.spark_conf())
    )
    said, logger = _Said(), logging.getLogger(warmup.__name__)
    level = logger.level
    logger.addHandler(said)
    logger.setLevel(logging.INFO)
    try:
        warmup.warm_up(spark, spec, plan=driving.outputs_planned, until=lambda: False)
    finally:
        logger.removeHandler(said)
        logger.setLevel(level)
    return said.messages
