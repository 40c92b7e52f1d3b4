"""OpenAI's Batch API for kora.llm.providers.batch: the requests as a JSONL file (`POST /files`,
purpose `batch`), a batch over it (`POST /batches`, 24 h window), polled
(`GET /batches/{id}`), and the answers read from its output and error files
(`GET /files/{id}/content`), one line per request, matched by `custom_id`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

import aiohttp
import orjson

from kora.llm.base import ProviderError, Request, Response
from kora.llm.masking import redact
from kora.llm.retry import parse_retry_after
from kora.llm.wire.aio import Answer
from kora.llm.wire.http import Caller


class _Provider(Caller, Protocol):
    """What the batch requests use of the OpenAI provider (kora.llm.providers.openai)."""

    base_url: str
    endpoint: str  # its API's path: chat completions', or the Responses API's

    async def _send(self, url: str, data: Any, **kw: Any) -> Answer: ...

    def _body(self, request: Request) -> dict[str, Any]: ...

    def _parse(self, data: Any, meta: Any) -> Response: ...


FINAL = ("completed", "failed", "expired", "cancelled")


async def _call(p: _Provider, path: str, data: Any = None, **kw: Any) -> bytes:
    """The body of one request's answer (a POST when it has `data`, else a GET); no size
    limit: a batch's files hold many answers (each is held to it on its own)."""
    method = "GET" if data is None else "POST"
    resp = await p._send(f"{p.base_url}{path}", data, method=method, whole=True, **kw)
    if resp.status >= 400:
        raise ProviderError(
            f"{p.label}: HTTP {resp.status} from {path}: {redact(resp.text, p._key)[:200]}",
            status=resp.status,
            retry_after=parse_retry_after(resp.headers),
        )
    return resp.body


async def submit(p: _Provider, items: list[tuple[str, Request]]) -> str:
    lines = b"".join(
        orjson.dumps({"custom_id": cid, "method": "POST", "url": p.endpoint, "body": p._body(r)})
        + b"\n"
        for cid, r in items
    )
    form = aiohttp.MultipartWriter("form-data")
    form.append("batch").set_content_disposition("form-data", name="purpose")
    file = form.append(lines, {"Content-Type": "application/jsonl"})
    file.set_content_disposition("form-data", name="file", filename="kora-batch.jsonl")
    # its own Content-Type (the multipart's boundary), not the session's JSON
    upload = await _call(p, "/files", form, headers={"Content-Type": form.content_type})
    made = {
        "input_file_id": orjson.loads(upload)["id"],
        "endpoint": p.endpoint,
        "completion_window": "24h",
    }
    return str(orjson.loads(await _call(p, "/batches", orjson.dumps(made)))["id"])


async def ended(p: _Provider, batch_id: str) -> bool:
    return orjson.loads(await _call(p, f"/batches/{batch_id}")).get("status") in FINAL


async def results(p: _Provider, batch_id: str) -> dict[str, Response | ProviderError]:
    batch = orjson.loads(await _call(p, f"/batches/{batch_id}"))
    out: dict[str, Response | ProviderError] = {}
    for key in ("output_file_id", "error_file_id"):
        file_id = batch.get(key)
        if not file_id:
            continue
        content = await _call(p, f"/files/{file_id}/content")
        for line in content.splitlines():
            if not line.strip():
                continue
            row = orjson.loads(line)
            cid = str(row.get("custom_id"))
            response = row.get("response") or {}
            error = row.get("error") or {}
            status = response.get("status_code")
            if status == 200 and isinstance(response.get("body"), dict):
                try:
                    resp = p._parse(response["body"], None)
                except ProviderError as exc:
                    out[cid] = exc
                    continue
                out[cid] = replace(resp, meta={**resp.meta, "batch": batch_id})
            elif error.get("code") in ("batch_expired", "batch_cancelled"):
                out[cid] = ProviderError(
                    f"{p.label}: batch request {error['code']}", retryable=True
                )
            else:
                message = error.get("message") or str(response.get("body"))[:200]
                out[cid] = ProviderError(
                    f"{p.label}: batch request failed: {redact(str(message), p._key)[:200]}",
                    status=status if isinstance(status, int) else None,
                    retryable=not isinstance(status, int) or status >= 500 or status == 429,
                )
    if batch.get("status") in ("failed", "expired", "cancelled") and not out:
        raise ProviderError(f"{p.label}: batch {batch_id} {batch.get('status')}", retryable=True)
    return out
