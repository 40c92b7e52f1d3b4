"""Content-addressed store of finished calls: a killed run never pays for a call twice.

The key covers what changes a model's answer (provider, model, output settings, system
prompt, messages, output schema) and nothing else: not the API key, timeouts, base URL or
retry settings. Entries are lines appended to pack files (kora.llm.store.packs says how many
processes write at once); an entry that does not parse or does not carry its own key is
ignored and fetched again.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson

from kora.llm.base import FINISH_REASONS, Request, Response, json_schema
from kora.llm.store.packs import Packs, packs_of

CACHE_VERSION = 1


def cache_key(identity: dict[str, Any], request: Request) -> str:
    payload = {
        "v": CACHE_VERSION,
        "model": identity,
        "system": request.system,
        "messages": [[m.role, m.content] for m in request.messages],
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "schema": json_schema(request.schema) if request.schema else None,
    }
    blob = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(blob).hexdigest()


class CallCache:
    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self._packs: Packs | None = None

    @property
    def packs(self) -> Packs:
        if self._packs is None:  # opened on first use: a store only named opens nothing
            self._packs = packs_of(self.root)
        return self._packs

    def read(self, key: str) -> bytes | None:
        """The stored entry of `key` as written, None when there is none (a store kept
        elsewhere, such as a bundle, reads its own way)."""
        return self.packs.read(key, rejected=False)

    def read_rejected(self, key: str) -> bytes | None:
        return self.packs.read(key, rejected=True)

    def has(self, key: str) -> bool:
        return self.read(key) is not None

    def get(self, key: str) -> Response | None:
        """The stored answer, or None when there is none or it is not a whole, sound
        entry (it is then fetched again, never a failure of the item)."""
        return self.parse(key, self.read(key))

    @staticmethod
    def parse(key: str, data: bytes | None) -> Response | None:
        """An entry's answer; None unless it is a whole, sound entry of `key`."""
        if data is None:
            return None
        try:
            raw = orjson.loads(data)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(raw, dict) or raw.get("key") != key:
            return None
        text, tin, tout = raw.get("text"), raw.get("input_tokens", 0), raw.get("output_tokens", 0)
        if not isinstance(text, str) or not all(_count(n) for n in (tin, tout)):
            return None
        finish = raw.get("finish_reason")
        write, read = raw.get("cache_write_tokens", 0), raw.get("cache_read_tokens", 0)
        meta: dict[str, Any] = {"cached": True}
        if raw.get("batch"):
            meta["batch"] = raw["batch"]  # answered in a batch: billed at half price
        latency = raw.get("latency")
        if isinstance(latency, (int, float)) and not isinstance(latency, bool) and latency >= 0:
            meta["latency"] = float(latency)  # the answer's time when it was made
        if isinstance(raw.get("served"), str):
            meta["model"] = raw["served"]  # the model id the provider said answered
        return Response(
            text=text,
            input_tokens=int(tin),
            output_tokens=int(tout),
            finish_reason=finish if finish in FINISH_REASONS else None,
            meta=meta,
            cache_write_tokens=int(write) if _count(write) else 0,
            cache_read_tokens=int(read) if _count(read) else 0,
        )

    def put(self, key: str, response: Response) -> None:
        # no fsync: an entry a power cut damaged fails `get`'s checks and is asked again
        self.packs.append(key, self.entry(key, response))

    def put_rejected(self, key: str, response: Response) -> None:
        """Keep an answer its caller turned down (a structured answer that missed its
        schema), apart from the answers `get` serves: it is never used again, but the
        question asked after it quotes it, so a replay of the result must show it."""
        self.packs.append(key, self.entry(key, response), rejected=True)

    def entry(self, key: str, response: Response) -> bytes:
        """An answer as the store writes it."""
        return orjson.dumps(
            {
                "key": key,
                "text": response.text,
                "input_tokens": response.input_tokens,
                "output_tokens": response.output_tokens,
                "finish_reason": response.finish_reason,
                **({"batch": response.meta["batch"]} if response.meta.get("batch") else {}),
                # the provider's own id of the model that answered (absent when it named none)
                **(
                    {"served": served}
                    if isinstance(served := response.meta.get("model"), str)
                    else {}
                ),
                **(
                    {
                        "cache_write_tokens": response.cache_write_tokens,
                        "cache_read_tokens": response.cache_read_tokens,
                    }
                    if response.cache_write_tokens or response.cache_read_tokens
                    else {}
                ),
                **(
                    {"latency": round(lat, 3)}
                    if isinstance(lat := response.meta.get("latency"), float)
                    else {}
                ),
            }
        )


def _count(n: object) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 0
