"""What a call pays: its answer written in the bill the moment it arrives, and room for its
worst case held in the budget while it is in flight (kora.llm.bill, kora.llm.budget)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from kora.llm.base import Request, Response
from kora.llm.bill import BillWriter
from kora.llm.budget import Budget, worst_case
from kora.llm.config import Price


@dataclass(frozen=True)
class Payer:
    """One model's calls, as the bill and the budget see them."""

    model: str  # the model's name in the config
    api_model: str | None  # the provider's name for it
    price: Price | None
    bill: BillWriter | None = None
    budget: Budget | None = None

    @contextlib.asynccontextmanager
    async def paying(
        self, request: Request, *, stage: str, key: str | None, ahead: bool
    ) -> AsyncIterator[Callable[[Response], Response]]:
        """Around one attempt of a call: BudgetReached before it is sent when the budget
        has no room for it; the function it gives is handed the answer as it arrives,
        before anything checks it (an answer too large to keep was still paid for)."""
        held = None
        if self.budget is not None:
            held = await self.budget.reserve(worst_case(request, self.price))
        answer: list[Response] = []

        def arrived(resp: Response) -> Response:
            answer.append(resp)
            if self.bill is not None:
                bill, api_model = self.bill, self.api_model
                bill.charge(
                    self.model, stage, resp, self.price, api_model=api_model, key=key, ahead=ahead
                )
            return resp

        try:
            yield arrived
        finally:
            if self.budget is not None and held is not None:
                self.budget.settle(held, answer[0] if answer else None, self.price)
