"""Each job's log file, also when one process (the run's broker) runs many jobs at once.

Records of the `kora` loggers go to the log file of the job whose task emitted them: the
file is held in a context variable, which every asyncio task inherits from the job that
created it, so two jobs side by side never write into each other's log.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from kora.llm.masking import terminal_safe

_current: ContextVar[logging.Handler | None] = ContextVar("kora_job_log", default=None)


class _Safe(logging.Formatter):
    """A record as a line a terminal shows and does not act on: a job log is read with
    `tail` and `cat`, and a message may quote a server (kora.llm.masking.terminal_safe)."""

    def format(self, record: logging.LogRecord) -> str:
        return terminal_safe(super().format(record))


_FORMAT = _Safe("%(asctime)s %(levelname)s %(message)s")


class _ToCurrentJob(logging.Handler):
    """To the current job's log; records of no job (the broker's own, its calls made
    ahead of the jobs) go to standard error, which is the broker's log file."""

    def __init__(self) -> None:
        super().__init__()
        self.outside = logging.StreamHandler()
        self.outside.setFormatter(_FORMAT)

    def emit(self, record: logging.LogRecord) -> None:
        (_current.get() or self.outside).handle(record)


_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    for name in ("kora", "kora.llm"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        logger.addHandler(_ToCurrentJob())
        logger.propagate = False
    # httpx logs every request URL at INFO; job logs keep what a user acts on
    logging.getLogger("httpx").setLevel(logging.WARNING)
    _installed = True


@contextmanager
def job_log(path: Path | str | None) -> Iterator[None]:
    """Send this job's records to `path` (created afresh) inside this block."""
    install()
    if path is None:
        handler: logging.Handler = logging.StreamHandler()
    else:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path, mode="w")
    handler.setFormatter(_FORMAT)
    token = _current.set(handler)
    try:
        yield
    finally:
        _current.reset(token)
        handler.close()
