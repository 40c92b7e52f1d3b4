"""Rate, token and concurrency limits for a model, held for the whole run.

- `rate`: the request rate (configured, or learnt from 429s), pure maths;
- `tokens`: the token buckets (input, output, input + output), pure maths;
- `state`: where both live (a file every process shares, or the process);
- `slots`: concurrency slots;
- `turns`: a process's calls waiting for their request slots, and its requests' writes;
- `limiter`: the `Limiter` that holds them around each call.
"""

from kora.llm.limits.limiter import Limiter, limiter_for
from kora.llm.limits.rate import RatePolicy, RateState, RateTuning
from kora.llm.limits.tokens import Cost, TokenPolicy, estimated_cost
from kora.llm.limits.turns import wrote

__all__ = [
    "Cost",
    "Limiter",
    "RatePolicy",
    "RateState",
    "RateTuning",
    "TokenPolicy",
    "estimated_cost",
    "limiter_for",
    "wrote",
]
