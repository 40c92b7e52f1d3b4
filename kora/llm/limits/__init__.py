"""Rate, token and concurrency limits for a model, held for the whole run.

- `rate`: the request rate (configured, or learnt from 429s), pure maths;
- `tokens`: the token buckets (input, output, input + output), pure maths;
- `state`: where both live (a file every process shares, or the process);
- `slots`: concurrency slots;
- `turns`: a process's calls waiting for their request slots, and its requests' writes;
- `limiter`: the `Limiter` that holds them around each call.
"""

from kora.llm.limits.limiter import Limiter, limiter_for, limiter_key
from kora.llm.limits.rate import MAX_RATE, RatePolicy, RateState, RateTuning
from kora.llm.limits.tokens import (
    Cost,
    TokenPolicy,
    TokenState,
    estimate_input_tokens,
    estimated_cost,
)
from kora.llm.limits.turns import wrote

__all__ = [
    "MAX_RATE",
    "Cost",
    "Limiter",
    "RatePolicy",
    "RateState",
    "RateTuning",
    "TokenPolicy",
    "TokenState",
    "estimate_input_tokens",
    "estimated_cost",
    "limiter_for",
    "limiter_key",
    "wrote",
]
