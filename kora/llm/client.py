"""Everything around a model call, once for every provider.

Order of a call: cache lookup -> (miss) the retry layer -> a rate/concurrency slot ->
provider.generate (the answer billed as it arrives, kora.llm.money.paying) -> cache store ->
usage. A request once sent is carried to its answer and stored even when its caller is
cancelled (kora.llm.shared_calls). A structured answer is validated with its pydantic
type; on a violation the model is asked once more with the validation error (unless the
config's `reask_invalid_answers` is false, as in the reference), and a second violation
is a failure of that item (the caller records it), never a crash of the shard.

The store serves only answers their caller accepts (`accept`): an answer that failed
validation is never replayed, so fixing a server and re-running asks the question again,
and a stored answer that does not pass (an edited file) counts as a miss.
Such an answer is kept apart (`put_rejected`), for `kora replay` to show it again.

Each attempt is held to the model's deadline and size limit (kora.llm.settings.bounds), and an
answer has the provider's secrets masked before anything keeps it (kora.llm.masking): a
target that echoes its key puts `****` in the record, with `masked` in its meta. When
the store cannot keep a paid answer (a full disk), the answer is used all the same,
kept in the shared calls of the process for any other job that asks, and counted as `unstored`:
the run says so at its end and fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar, Unpack, cast

from pydantic import BaseModel

from kora.llm.answers import StructuredOutputError, parse_answer
from kora.llm.base import (
    ChatMessage,
    ProviderError,
    Request,
    Response,
    TextOptions,
    clean_text,
    is_retryable,
)
from kora.llm.limits import Limiter, estimated_cost
from kora.llm.masking import masker_for, secrets_of
from kora.llm.money.budget import BudgetReached
from kora.llm.money.paying import Payer
from kora.llm.providers.batch import BatchProvider, queue_for
from kora.llm.providers.factories import Shared
from kora.llm.retry import RetryPolicy, attempts
from kora.llm.settings.bounds import DEFAULT_TIMEOUT, check_size, deadline
from kora.llm.settings.config import DEFAULT_MAX_TOKENS, ModelConfig
from kora.llm.store.cache import cache_key

M = TypeVar("M", bound=BaseModel)
log = logging.getLogger("kora.llm")


@dataclass(frozen=True)
class _Call:
    """One call on its way: its request, the stage that asks, its call-store key (None:
    no store), and whether its caller accepts an answer (None: any)."""

    request: Request
    stage: str
    key: str | None
    accept: Callable[[Response], bool] | None

    @property
    def structured(self) -> bool:
        return self.request.schema is not None


class ModelClient:
    """A configured model as used by the pipeline's stages: its provider, limiter, bill
    and budget, store and usage from what it shares with the run (`Shared`); a limiter
    and a retry policy of its own may be given (`kora ping`)."""

    def __init__(
        self,
        name: str,
        config: ModelConfig,
        shared: Shared | None = None,
        *,
        limiter: Limiter | None = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        shared = shared or Shared()
        self.name = name
        # each answer written in the bill as it arrives, each call within the budget
        self.payer = Payer(name, config, shared.bill, shared.budget)
        # shared with the other clients of the process (kora.llm.shared_calls); `ahead`: this
        # client makes calls before the jobs that need them (kora.run.broker.prefetch)
        self.shared_calls = shared.shared_calls
        self.ahead = shared.ahead
        self.sends = shared.sends
        self.config = config
        self.cache = shared.store
        self.usage = shared.usage
        self.provider = shared.provider(name, config)
        self.limiter = limiter or shared.limiter(name, config)
        self.retry_policy = retry_policy or RetryPolicy()
        self.identity = config.output_settings()
        self.label = str(getattr(self.provider, "label", f"model {name!r}"))
        # a transport that says when it writes a request (kora.llm.wire.aio) has the limiter
        # count it from then; others from its slot
        self.traced = bool(getattr(self.provider, "reports_writes", False))
        self.timeout = config.timeout or DEFAULT_TIMEOUT
        # a configuration error (kora.llm.wire.faults) of this model's text or structured calls:
        # the next ones of that kind fail with it at once, without being sent (in every
        # client of the process that shares those calls: the jobs' and the calls ahead)
        shared_calls = self.shared_calls
        self.refused: dict[bool, ProviderError] = (
            {} if shared_calls is None else shared_calls.refused(name)
        )

    @property
    def is_mock(self) -> bool:
        return self.config.kind.offline

    def request(
        self,
        messages: list[ChatMessage],
        *,
        system: str | None = None,
        schema: type[BaseModel] | None = None,
        max_tokens: int | None = None,
        hints: dict[str, Any] | None = None,
    ) -> Request:
        # a call's own limit is for its answer alone: a model that reasons first gets its own
        most = None if self.config.reasons else max_tokens
        return Request(
            messages=tuple(messages),
            system=system,
            schema=schema,
            max_tokens=most or self.config.max_tokens or DEFAULT_MAX_TOKENS,
            temperature=self.config.temperature,
            hints=hints or {},
        )

    async def call(
        self,
        request: Request,
        *,
        stage: str,
        accept: Callable[[Response], bool] | None = None,
    ) -> Response:
        """One call, from the cache when it was made before; raises after retries.

        `accept` says whether an answer is usable; one that is not is returned to the
        caller (who asks again or fails the item) but never stored or served from the store.
        """
        key = cache_key(self.identity, request) if self.cache is not None else None
        call = _Call(request, stage, key, accept)
        hit = await self._recalled(call)
        if hit is not None:
            return hit
        if key is None or self.shared_calls is None:
            return await self._send(call)
        return await self.shared_calls.single(key, lambda: self._send(call), ahead=self.ahead)

    async def _recalled(self, call: _Call) -> Response | None:
        """The stored answer its caller accepts, counted; None when it must be asked."""
        key = call.key
        if key is None or self.cache is None:
            return None
        if self.shared_calls is not None:
            # the same question asked by another job: share its answer (and when that job
            # was cancelled, wait for the request it left out)
            await self.shared_calls.settled(key)
        hit = self.cache.get(key)
        if hit is None and self.shared_calls is not None:
            hit = self._kept(key, call.stage)
        if hit is None or (call.accept is not None and not call.accept(hit)):
            return None
        paid = self.shared_calls is not None and not self.ahead and self.shared_calls.claim(key)
        self.usage.add(self.name, call.stage, cached=not paid)
        if not self.ahead:
            self.usage.use(key, self.name, call.stage)
        return hit

    async def _send(self, call: _Call) -> Response:
        """The call itself, attempt after attempt (kora.llm.retry), counted as it ends."""
        self._check_refused(call)
        try:
            resp = await self._attempts(call)
        except BudgetReached:
            raise  # not sent: no failed call of the model's
        except Exception as exc:
            if isinstance(exc, ProviderError) and exc.config_error:
                self.refused.setdefault(call.structured, exc)
            self.usage.add(self.name, call.stage, failed=True)
            raise
        self.usage.add(self.name, call.stage)
        if call.key is not None and not self.ahead:
            self.usage.use(call.key, self.name, call.stage)
        return resp

    def _check_refused(self, call: _Call) -> None:
        """A configuration error of this model's calls of its kind (kora.llm.wire.faults): the
        next ones fail with it at once, without being sent."""
        if call.structured in self.refused:
            raise self.refused[call.structured]

    async def _attempts(self, call: _Call) -> Response:
        """Each attempt a slot of its own in the model's limiter, so a retried call queues
        behind the calls already waiting (a batch's wait is its own); the retry layer
        decides between attempts, and is no frame around them."""
        retries = attempts(
            should_retry=is_retryable,
            policy=self.retry_policy,
            on_retry=self._waiting,
            on_resume=self._resumed,
        )
        cost = estimated_cost(call.request)
        async for attempt in retries:
            async with attempt:
                if self._batched(call.key):
                    return await self._from_batch(call)
                return await self.limiter.call(
                    lambda: self._carried(call), cost, traced=self.traced
                )
        raise AssertionError("unreachable: the attempts end in an answer or raise")

    def _waiting(self, exc: BaseException, attempt: int, wait: float) -> None:
        self.usage.waiting += 1
        self.usage.last_retry = f"{exc}"[:200]

    def _resumed(self) -> None:
        self.usage.waiting -= 1

    async def _carried(self, call: _Call) -> Response:
        """Once sent, the request is carried to its answer, billed and stored, whatever
        befalls its caller (kora.llm.shared_calls)."""
        self._check_refused(call)  # refused while this call waited for its turn
        sent = asyncio.ensure_future(self._exchange(call))
        if self.shared_calls is None:
            return await sent
        self.shared_calls.send(call.key, sent)
        return await asyncio.shield(sent)

    async def _exchange(self, call: _Call) -> Response:
        """One request and its answer: paid for, within the deadline, kept."""
        # the answer's own time, not the waits for the limiter or between retries (a
        # mock's time measures nothing, and would make its runs differ)
        started = time.monotonic()
        paying = self.payer.paying(call.request, stage=call.stage, key=call.key, ahead=self.ahead)
        async with paying as arrived, deadline(self.timeout, self.label):
            resp = self._bounded(arrived(await self.provider.generate(call.request)))
        if not self.is_mock:
            resp = replace(resp, meta={**resp.meta, "latency": time.monotonic() - started})
        return self._keep(call, resp)

    def _batched(self, key: str | None) -> bool:
        """Whether this call goes out in a batch: the model says so (its kind has batches:
        kora.config.checks), it is sent, not answered offline, and the answer has a
        call-store key to come back under."""
        return self.config.batch and self.sends and not self.is_mock and key is not None

    async def _from_batch(self, call: _Call) -> Response:
        """The answer from the provider's batch (kora.llm.providers.batch), paid for and kept."""
        assert call.key is not None and self.cache is not None
        provider = cast(BatchProvider, self.provider)
        queue = queue_for(provider, self.cache.root.parent / "batches", self.cache)
        paying = self.payer.paying(call.request, stage=call.stage, key=call.key, ahead=self.ahead)
        async with paying as arrived:
            return self._keep(call, self._bounded(arrived(await queue.ask(call.key, call.request))))

    def _keep(self, call: _Call, resp: Response) -> Response:
        """An answer its caller accepts, into the store; one it does not, kept apart."""
        if call.key is None or self.cache is None:
            return resp
        if call.accept is None or call.accept(resp):
            self._store(call.key, resp, call.stage)
        else:
            # never served again, but the question asked after it quotes it
            with contextlib.suppress(OSError):
                self.cache.put_rejected(call.key, resp)
        return resp

    def _bounded(self, resp: Response) -> Response:
        """An attempt's answer within the size limit, as valid Unicode, secrets masked."""
        check_size(self.label, resp.text, self.config.max_reply_bytes)
        text, masked = masker_for(frozenset(secrets_of(self.provider))).masked(
            clean_text(resp.text)
        )
        if masked:
            return replace(resp, text=text, meta={**resp.meta, "masked": True})
        return replace(resp, text=text)

    def _store(self, key: str, resp: Response, stage: str) -> None:
        """Into the call store; when it cannot keep the answer (a full disk), the answer
        is used all the same, kept for the process's other jobs, and counted."""
        try:
            self.cache.put(key, resp)  # type: ignore[union-attr]
        except OSError as exc:
            log.error(
                "%s: the call store could not keep a paid answer (%s); it is used, "
                "and the run will say so at its end",
                self.label,
                exc.strerror or exc,
            )
            if self.shared_calls is not None:
                self.shared_calls.keep(key, resp, counted=not self.ahead)
            if not self.ahead:
                self.usage.add_unstored(self.name, stage)

    def _kept(self, key: str, stage: str) -> Response | None:
        """An answer of this process the store could not keep; the first job to use one
        made ahead of it counts it as its own."""
        assert self.shared_calls is not None
        got = self.shared_calls.kept(key, count=not self.ahead)
        if got is None:
            return None
        resp, count = got
        if count:
            self.usage.add_unstored(self.name, stage)
        return resp

    async def text(
        self, messages: list[ChatMessage], *, stage: str, **options: Unpack[TextOptions]
    ) -> str:
        """The answer's text, stripped; `accept` (on that text) as in `call`."""
        accept = options.get("accept")
        request = self.request(
            messages,
            system=options.get("system"),
            max_tokens=options.get("max_tokens"),
            hints=options.get("hints"),
        )
        resp = await self.call(
            request,
            stage=stage,
            accept=None if accept is None else (lambda r: accept(r.text.strip())),
        )
        return resp.text.strip()

    async def structured(
        self,
        messages: list[ChatMessage],
        schema: type[M],
        *,
        stage: str,
        system: str | None = None,
        hints: dict[str, Any] | None = None,
    ) -> M:
        convo = list(messages)
        last_error = ""
        # each answer validated once: `accept` (asked by the store and after the call) and
        # the answer returned share the result
        seen: dict[str, M | str] = {}

        def parsed_of(text: str) -> M | str:
            if text not in seen:
                seen[text] = parse_answer(schema, text)
            return seen[text]

        def accept(resp: Response) -> bool:
            return isinstance(parsed_of(resp.text), schema)

        attempts = 2 if self.config.reask_invalid_answers else 1
        for attempt in range(attempts):
            req = self.request(convo, system=system, schema=schema, hints=hints)
            resp = await self.call(req, stage=stage, accept=accept)
            parsed = parsed_of(resp.text)
            if isinstance(parsed, schema):
                return parsed
            last_error = str(parsed)
            if attempt < attempts - 1:
                convo = [
                    *messages,
                    ChatMessage("assistant", resp.text),
                    ChatMessage(
                        "user",
                        f"Your previous answer was rejected because {last_error}\n\n"
                        "Answer again with one JSON object that satisfies the schema exactly, "
                        "respecting every length limit.",
                    ),
                ]
        said = "twice" if attempts == 2 else "(asked once: reask_invalid_answers is false)"
        raise StructuredOutputError(
            f"model {self.name!r} gave an invalid {schema.__name__} {said}: {last_error}"
        )

    async def aclose(self) -> None:
        await self.provider.aclose()
