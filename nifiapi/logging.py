"""Log levels, and a level-filtering wrapper around a logger.

The logger a processor receives as ``self.logger`` is the runtime's (in flowactors,
``flowactors.nifi.host.ComponentLog``); NiFi's framework never uses ``Logger`` below either.
"""

from __future__ import annotations

from enum import Enum


class LogLevel(Enum):
    TRACE = 1
    DEBUG = 2
    INFO = 3
    WARN = 4
    ERROR = 5


class Logger:
    """Passes each message at ``min_level`` or above on to ``java_logger`` (any object with
    ``trace``/``debug``/``info``/``warn``/``error``)."""

    def __init__(self, min_level, java_logger):
        self.min_level = min_level
        self.java_logger = java_logger

    def _log(self, level, method, msg, *args):
        if level.value >= self.min_level.value:
            getattr(self.java_logger, method)(msg, *args)

    def trace(self, msg, *args):
        self._log(LogLevel.TRACE, "trace", msg, *args)

    def debug(self, msg, *args):
        self._log(LogLevel.DEBUG, "debug", msg, *args)

    def info(self, msg, *args):
        self._log(LogLevel.INFO, "info", msg, *args)

    def warn(self, msg, *args):
        self._log(LogLevel.WARN, "warn", msg, *args)

    def error(self, msg, *args):
        self._log(LogLevel.ERROR, "error", msg, *args)
