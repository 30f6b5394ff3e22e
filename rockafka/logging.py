"""structlog set-up: one key=value event per thing that happened, to stderr."""

from __future__ import annotations

import logging
import sys

import structlog


def configure(level: str = "info", json: bool = False) -> None:
    lvl = getattr(logging, level.upper(), logging.INFO)
    logging.basicConfig(stream=sys.stderr, level=lvl, format="%(message)s")
    renderer = structlog.processors.JSONRenderer() if json else structlog.processors.KeyValueRenderer(
        key_order=["timestamp", "level", "event"], drop_missing=True
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
