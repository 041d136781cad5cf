"""Logging setup: structlog, JSON lines when not on a terminal, readable when on one."""

from __future__ import annotations

import logging
import sys

import structlog

_QUIET = ("py4j", "kafka", "pyspark", "urllib3", "rdkafka")


def configure(level: str = "INFO", *, json: bool | None = None) -> None:
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    if json is None:
        json = not sys.stderr.isatty()
    renderer = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=True)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=sys.stderr)
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.DEBUG if numeric <= logging.DEBUG else logging.CRITICAL)
