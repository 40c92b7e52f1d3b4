"""Batch mode: calls of a model with `batch: true` go out in the provider's batches, at
half price, and come back into the call store like any answer.

One `BatchQueue` per model and event loop (in a local run, the broker's: every job's
calls meet there, so a batch spans the whole run). A question waits up to `window`
seconds for others to join it; the batch is then sent, and its id and the call-store key
of every request are written to `.kora/batches/` *before* any waiting, so a killed run,
started again, finds the batch and waits for it rather than paying twice. The batch is
polled every `poll` seconds; each answer resolves the call that asked it (the client
then validates and stores it as usual). Each request to the provider (sending, each look,
reading the answers) is held to the model's deadline (kora.llm.settings.bounds). A request the batch could not answer fails on
its own: an error is the call's error, an expired or canceled one is asked again (in a
new batch) by the retry layer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import orjson

from kora.llm.base import ProviderError, Request, Response
from kora.llm.settings.bounds import deadline
from kora.llm.store.cache import CallCache
from kora.llm.store.files import write_atomic

log = logging.getLogger("kora")

WINDOW = float(os.environ.get("KORA_BATCH_WINDOW", "2.0"))  # seconds a question waits for others
POLL = float(os.environ.get("KORA_BATCH_POLL", "30.0"))  # seconds between looks at a batch
MAX_REQUESTS = 10_000  # per batch (the providers allow 100,000 / 50,000)
MAX_MISSES = 10  # failed looks at a batch in a row before its calls fail
SETTLE = 0.5  # seconds between handing out a batch's answers and calling it ended


class BatchProvider(Protocol):
    name: str
    label: str
    model: str
    base_url: str
    timeout: float

    async def batch_submit(self, items: list[tuple[str, Request]]) -> str: ...

    async def batch_ended(self, batch_id: str) -> bool: ...

    async def batch_results(self, batch_id: str) -> dict[str, Response | ProviderError]: ...


@dataclass
class BatchQueue:
    provider: BatchProvider
    folder: Path
    store: CallCache | None = None  # a batch whose answers are all stored is done
    window: float = WINDOW
    poll: float = POLL
    futures: dict[str, asyncio.Future[Response]] = field(default_factory=dict)
    requests: dict[str, Request] = field(default_factory=dict)
    waiting: list[str] = field(default_factory=list)
    # answers of a resumed batch that nobody in this run has asked for yet
    answers: dict[str, Response] = field(default_factory=dict)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    resumed: bool = False

    def _deadline(self) -> contextlib.AbstractAsyncContextManager[None]:
        """One request to the provider, held to the model's deadline."""
        return deadline(self.provider.timeout, self.provider.label)

    @property
    def ident(self) -> str:
        return f"{self.provider.name}|{self.provider.model}|{self.provider.base_url}"

    async def ask(self, key: str, request: Request) -> Response:
        """The answer to `request` (stored under `key`), from a batch."""
        self._resume()
        if key in self.answers:
            return self.answers.pop(key)
        fut = self.futures.get(key)
        if fut is None:
            fut = asyncio.get_running_loop().create_future()
            self.futures[key] = fut
            self.requests[key] = request
            self.waiting.append(key)
            if len(self.waiting) >= MAX_REQUESTS:
                self._spawn(self._send(0.0))
            elif len(self.waiting) == 1:
                self._spawn(self._send(self.window))
        return await asyncio.shield(fut)

    def _spawn(self, coro: Coroutine[object, object, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _resume(self) -> None:
        """Batches a killed run sent for this model: wait for them, do not send again."""
        if self.resumed:
            return
        self.resumed = True
        for f in sorted(self.folder.glob("*.json")):
            try:
                doc = orjson.loads(f.read_bytes())
            except (OSError, orjson.JSONDecodeError):
                continue
            if doc.get("model") != self.ident or doc.get("state") != "in_progress":
                continue
            if self.store is not None and all(self.store.has(k) for k in doc.get("keys", [])):
                # every answer was stored before the run ended: nothing left to wait for
                self._write(f, str(doc["id"]), list(doc["keys"]), "ended")
                continue
            keys = [k for k in doc.get("keys", []) if k not in self.futures]
            loop = asyncio.get_running_loop()
            for k in keys:
                self.futures[k] = loop.create_future()
            log.info(
                "batch %s of %s: sent by an earlier run, waiting for it",
                doc["id"],
                self.provider.name,
            )
            self._spawn(self._wait(str(doc["id"]), keys, f, resumed=True))

    async def _send(self, delay: float) -> None:
        await asyncio.sleep(delay)
        keys, self.waiting = self.waiting[:MAX_REQUESTS], self.waiting[MAX_REQUESTS:]
        if not keys:
            return
        items = [(k, self.requests[k]) for k in keys]
        try:
            async with self._deadline():
                batch_id = await self.provider.batch_submit(items)
        except Exception as exc:
            self._fail(keys, exc)
            return
        path = self.folder / f"{batch_id}.json"
        # written before any waiting: a killed run finds it (BatchQueue._resume)
        self._write(path, batch_id, keys, "in_progress")
        log.info("batch %s of %s: %d requests sent", batch_id, self.provider.name, len(keys))
        await self._wait(batch_id, keys, path)

    def _write(self, path: Path, batch_id: str, keys: list[str], state: str) -> None:
        doc = {"id": batch_id, "model": self.ident, "state": state, "keys": keys, "at": time.time()}
        write_atomic(path, orjson.dumps(doc))

    async def _wait(
        self, batch_id: str, keys: list[str], path: Path, resumed: bool = False
    ) -> None:
        misses = 0
        while True:
            try:
                async with self._deadline():
                    ended = await self.provider.batch_ended(batch_id)
                if ended:
                    async with self._deadline():
                        results = await self.provider.batch_results(batch_id)
                    break
                misses = 0
            except ProviderError as exc:
                # a batch runs for hours: a failed look at it is tried again, a few times
                # in a row, before its calls fail (and the retry layer asks again)
                misses += 1
                if not exc.retryable or misses > MAX_MISSES:
                    self._fail(keys, exc)
                    return
                log.warning("batch %s: cannot be read (%s); trying again", batch_id, exc)
            await asyncio.sleep(self.poll)
        self._deliver(batch_id, keys, results, resumed)
        # "ended" once the askers had time to store their answers: a run that stops before
        # then finds them in the call store, or reads the batch again (free), when it
        # resumes (_resume) rather than paying twice
        await asyncio.sleep(SETTLE)
        self._write(path, batch_id, keys, "ended")

    def _deliver(
        self,
        batch_id: str,
        keys: list[str],
        results: dict[str, Response | ProviderError],
        resumed: bool,
    ) -> None:
        for k in keys:
            got = results.get(k) or ProviderError(
                f"{self.provider.label}: no answer in batch {batch_id}", retryable=True
            )
            if resumed and isinstance(got, Response):
                self.answers[k] = got  # for whoever asks later in the run
                fut = self.futures.pop(k, None)
                if fut is not None and not fut.done():
                    fut.set_result(got)  # and whoever waits now
                continue
            self._resolve(k, got)

    def _fail(self, keys: list[str], exc: BaseException) -> None:
        err = exc if isinstance(exc, ProviderError) else ProviderError(str(exc), retryable=True)
        for k in keys:
            self._resolve(k, err)

    def _resolve(self, key: str, outcome: Response | ProviderError) -> None:
        fut = self.futures.pop(key, None)
        self.requests.pop(key, None)
        if fut is None or fut.done():
            return
        if isinstance(outcome, Response):
            fut.set_result(outcome)
        else:
            fut.set_exception(outcome)
            fut.exception()  # retrieved: the asker may be gone (a resumed batch)

    async def aclose(self) -> None:
        for t in list(self.tasks):
            t.cancel()
            with contextlib.suppress(BaseException):
                await t


_QUEUES: dict[tuple[int, int], BatchQueue] = {}


def queue_for(provider: BatchProvider, folder: Path, store: CallCache | None = None) -> BatchQueue:
    """The model's queue in this event loop (`store`: the call store)."""
    loop = asyncio.get_running_loop()
    key = (id(provider), id(loop))
    q = _QUEUES.get(key)
    if q is None:
        folder.mkdir(parents=True, exist_ok=True)
        q = _QUEUES[key] = BatchQueue(provider, folder, store, window=WINDOW, poll=POLL)
    return q


def batch_counts(folder: Path, since: float) -> dict[str, int]:
    """Batches sent since `since`, by state: for the progress line."""
    out = {"in_progress": 0, "ended": 0}
    for f in folder.glob("*.json"):
        try:
            if f.stat().st_mtime < since:
                continue
            state = orjson.loads(f.read_bytes()).get("state")
        except (OSError, orjson.JSONDecodeError):
            continue
        if state in out:
            out[state] += 1
    return out
