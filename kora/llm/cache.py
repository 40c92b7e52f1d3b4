"""Content-addressed store of finished calls: a killed run never pays for a call twice.

The key covers what changes a model's answer (provider, model, output settings, system
prompt, messages, output schema) and nothing else: not the API key, timeouts, base URL or
retry settings. Entries are written to a temp file and renamed, so many jobs (also on a
shared cluster filesystem) can write at once; an entry that does not parse or does not
carry its own key is ignored and re-fetched.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson

from kora.llm.base import Request, Response
from kora.schemas import FINISH_REASONS

CACHE_VERSION = 1


def cache_key(identity: dict[str, Any], request: Request) -> str:
    payload = {
        "v": CACHE_VERSION,
        "model": identity,
        "system": request.system,
        "messages": [[m.role, m.content] for m in request.messages],
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "schema": request.schema.model_json_schema() if request.schema else None,
    }
    blob = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(blob).hexdigest()


class CallCache:
    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Response | None:
        try:
            raw = orjson.loads(self._path(key).read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError, OSError):
            return None
        if (
            not isinstance(raw, dict)
            or raw.get("key") != key
            or not isinstance(raw.get("text"), str)
        ):
            return None
        finish = raw.get("finish_reason")
        return Response(
            text=raw["text"],
            input_tokens=int(raw.get("input_tokens", 0)),
            output_tokens=int(raw.get("output_tokens", 0)),
            finish_reason=finish if finish in FINISH_REASONS else None,
            meta={"cached": True},
        )

    def put(self, key: str, response: Response) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = orjson.dumps(
            {
                "key": key,
                "text": response.text,
                "input_tokens": response.input_tokens,
                "output_tokens": response.output_tokens,
                "finish_reason": response.finish_reason,
            }
        )
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:8]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None
