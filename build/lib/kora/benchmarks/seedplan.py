"""A planned seed call: what a cell's seeds job asks when a version plans its seeds (KORA
v2's population plans): how many seeds, and the persona and scenario flavor to pin."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from kora.benchmarks.schemas import AgeRange


class Pinned(BaseModel):
    """The demographics a persona pins in its seed."""

    model_config = ConfigDict(extra="forbid")
    ageRange: AgeRange
    gender: Literal["girl", "boy"]
    ses: Literal["low", "middle", "high"]
    raceEthnicity: Literal["white", "hispanic", "black", "asian", "other"]


class SeedOrder(BaseModel):
    """One seed call of a shard: how many seeds, and what they must be."""

    model_config = ConfigDict(extra="forbid")
    count: int
    pinned: Pinned | None = None
    flavor: str | None = None
