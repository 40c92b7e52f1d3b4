"""What a call pays: its answer priced and written in the bill the moment it arrives, and
room for its worst case held in the budget while it is in flight, settled at the price
written (kora.llm.money.bill, kora.llm.money.budget)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from kora.llm.base import Request, Response
from kora.llm.money.bill import BillWriter
from kora.llm.money.budget import Budget, worst_case
from kora.llm.money.usage import Counts
from kora.llm.settings.config import ModelConfig


@dataclass(frozen=True)
class Payer:
    """One model's calls, as the bill and the budget see them (a budget settles at what
    the bill writes: a payer with a budget has a bill)."""

    model: str  # the model's name in the config
    config: ModelConfig  # its settings: the provider's name for it, its prices
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
            held = await self.budget.reserve(worst_case(request, self.config.cost_price))
        paid: list[Counts] = []

        def arrived(resp: Response) -> Response:
            if self.bill is not None:
                c = self.config
                price = c.batch_cost_price if resp.meta.get("batch") else c.cost_price
                bill, api_model = self.bill, c.model
                charged = bill.charge(
                    self.model, stage, resp, price, api_model=api_model, key=key, ahead=ahead
                )
                paid.append(charged)
            return resp

        try:
            yield arrived
        finally:
            if self.budget is not None and held is not None:
                self.budget.settle(held, paid[0] if paid else None)
