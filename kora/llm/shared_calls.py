"""Calls shared by the jobs of one process: asked once while in flight, paid once.

The run's broker serves many jobs and makes calls ahead of them (kora.run.broker.prefetch). Two
callers that ask the same question at the same time get one call between them: the second
waits for the first's answer. A call made ahead of its job is paid by nobody's shard until
the job asks for it: then it counts for that job as the paid call it is (its tokens and
cost in the job's status and in usage.json), once, and as a stored answer after that.

An answer the call store could not keep (a full disk) is kept here instead, for the rest
of the process: a job that asks for it uses it rather than paying for it again.

A request once sent is carried to its answer even when the job that asked is cancelled
(its script went away, the run is being stopped): the answer is paid for, so it is billed
and stored. When the process is asked to stop (`stop`), no new request goes out
(`RunStopping`), and `drain` waits for the ones in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kora.llm.base import ProviderError, Response


class RunStopping(BaseException):
    """The process is stopping: a call not yet sent is not sent. A BaseException, as a
    cancellation is: no item records it as its failure, no job writes its shard."""


@dataclass
class SharedCalls:
    _inflight: dict[str, asyncio.Future[Response]] = field(default_factory=dict)
    # requests sent and not yet answered (drained when the process stops)
    _sending: set[asyncio.Future[Response]] = field(default_factory=set)
    # those with a call-store key, by key: a lookup at every call, with hundreds in
    # flight at a provider's limit
    _sent: dict[str, asyncio.Future[Response]] = field(default_factory=dict)
    stopping: bool = False
    # calls made ahead and not yet asked for by their job (what they cost is in the bill,
    # kora.llm.money.bill: only their keys are kept, and a full grid makes 100,000 of them)
    _ahead: set[str] = field(default_factory=set)
    # answers the call store could not keep, and whether a job has counted them yet
    _kept: dict[str, tuple[Response, bool]] = field(default_factory=dict)
    # per model, the configuration error (kora.llm.wire.faults) its text or structured calls
    # got: every client of the model in this process fails those calls with it, unsent
    _refused: dict[str, dict[bool, ProviderError]] = field(default_factory=dict)

    def refused(self, model: str) -> dict[bool, ProviderError]:
        return self._refused.setdefault(model, {})

    def _pending(self, key: str) -> asyncio.Future[Response] | None:
        found = self._inflight.get(key)
        return found if found is not None else self._sent.get(key)

    async def settled(self, key: str) -> None:
        """Until no call asks this question, nor a request of one cancelled after sending
        it (its answer on its way to the call store)."""
        pending = self._pending(key)
        while pending is not None:
            await asyncio.wait([pending])
            after = self._pending(key)
            pending = after if after is not pending else None

    async def single(
        self, key: str, ask: Callable[[], Awaitable[Response]], *, ahead: bool
    ) -> Response:
        """`ask()`, the one call of this question in the process: another asking it
        meanwhile waits for its answer (`settled`), and asks again itself if it fails."""
        fut: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            resp = await ask()
        except Exception as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: no warning is logged
            raise
        except BaseException:
            fut.cancel()
            raise
        else:
            fut.set_result(resp)
            return resp
        finally:
            if self._inflight.get(key) is fut:
                del self._inflight[key]
            if ahead and fut.done() and not fut.cancelled() and fut.exception() is None:
                self._ahead.add(key)

    def send(self, key: str | None, request: asyncio.Future[Response]) -> None:
        """A request goes out; RunStopping instead when the process is stopping."""
        if self.stopping:
            request.cancel()
            raise RunStopping()
        self._sending.add(request)
        if key is not None:
            self._sent[key] = request

        def done(t: asyncio.Future[Response]) -> None:
            self._sending.discard(t)
            if key is not None and self._sent.get(key) is t:
                del self._sent[key]
            if not t.cancelled():
                t.exception()  # retrieved: its caller may be gone

        request.add_done_callback(done)

    def stop(self) -> None:
        self.stopping = True

    async def drain(self) -> None:
        """Until every request sent has its answer (or its error)."""
        while self._sending:
            await asyncio.wait(list(self._sending))

    def keep(self, key: str, resp: Response, *, counted: bool) -> None:
        """An answer the store could not keep (`counted`: a job has counted it so)."""
        self._kept[key] = (resp, counted)

    def kept(self, key: str, *, count: bool) -> tuple[Response, bool] | None:
        """A kept answer, and whether the asker is the first job to use it (`count`: the
        asker is a job, not a call made ahead of one)."""
        got = self._kept.get(key)
        if got is None:
            return None
        resp, counted = got
        first = count and not counted
        if first:
            self._kept[key] = (resp, True)
        return resp, first

    def claim(self, key: str) -> bool:
        """True the first time a job asks for a call made ahead of it."""
        if key not in self._ahead:
            return False
        self._ahead.discard(key)
        return True

    def unclaimed(self) -> int:
        """The calls made ahead that no job has asked for yet (their cost is already paid)."""
        return len(self._ahead)
