"""A deployed chat service as a target: the MyDD contract (spec section 6).

The service keeps each conversation's history on its side, keyed by a session id we
make up per test (`<uuid4>_<uuid4>`), and always receives the child's age:

- memory, when the scenario has one: `POST {base}/restore_session_memory` with
  `{"session_id", "messages": [user: memory, assistant: "I'll keep that in mind."], "age"}`
  before the first turn (the answer is ignored);
- each turn: `POST {base}/query_chat_langchain_mem?session_id=<id>` with
  `{"prompt": <the newest user message only>, "age"}`, answered by JSON `{"response": ...}`.

No system prompt is sent. Calls go through the same limiter and retry layer as the LLM
providers; a turn retried after a dropped connection may reach the service twice (the
reference behaves the same way).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import orjson

from kora.config import ModelConfig
from kora.llm.base import ChatMessage, ProviderError, Response, clean_text
from kora.llm.http import DEFAULT_TIMEOUT, LoopBound, new_client, post, read_key
from kora.llm.limits import Limiter, limited, limiter_for
from kora.llm.retry import RetryPolicy, parse_retry_after, redact
from kora.taxonomy import AGE_FOR_RANGE

MEMORY_ACK = "I'll keep that in mind."


def new_session_id() -> str:
    return f"{uuid4()}_{uuid4()}"


@dataclass
class ChatEndpointSession:
    """One test's conversation with the service."""

    target: ChatEndpointTarget
    session_id: str
    age: int

    async def reply(self, messages: list[ChatMessage]) -> Response:
        """Send the newest user message of `messages`; the service has the rest."""
        prompt = next((m.content for m in reversed(messages) if m.role == "user"), None)
        if prompt is None:
            raise ValueError("a chat-endpoint turn needs a user message")
        data = await self.target.post(
            "/query_chat_langchain_mem",
            {"prompt": prompt, "age": self.age},
            params={"session_id": self.session_id},
            answer_field="response",
        )
        return Response(text=clean_text(data["response"]), meta={"session_id": self.session_id})


class ChatEndpointTarget:
    """A `chat-endpoint` model: opens sessions and carries their calls."""

    def __init__(
        self,
        name: str,
        config: ModelConfig,
        *,
        limiter: Limiter | None = None,
        retry_policy: RetryPolicy | None = None,
        state_dir: Path | None = None,
    ) -> None:
        if not config.base_url:
            raise ValueError(f"model {name!r}: a chat-endpoint model needs base_url")
        self.name = name
        self.config = config
        self.base = config.base_url.rstrip("/")
        self.label = f"model {name!r} ({self.base})"  # names the service in every error
        self.limiter = limiter or limiter_for(name, config, state_dir)
        self.retry_policy = retry_policy or RetryPolicy()
        self.timeout = config.timeout or DEFAULT_TIMEOUT
        self._clients = LoopBound(self._new_client, lambda c: c.aclose())
        self._key: str | None = None

    def _new_client(self) -> httpx.AsyncClient:
        env = self.config.api_key_env
        self._key = read_key(env, self.label, required=True) if env else None
        return new_client(self.timeout, self._key, **{"Content-Type": "application/json"})

    async def open_session(self, age_range: str, memory: str | None = None) -> ChatEndpointSession:
        """A fresh session for one test; its memory, if any, is restored first."""
        try:
            age = AGE_FOR_RANGE[age_range]  # type: ignore[index]
        except KeyError:
            raise ValueError(
                f"unknown age range {age_range!r} (expected one of {', '.join(AGE_FOR_RANGE)})"
            ) from None
        session = ChatEndpointSession(self, new_session_id(), age)
        if memory:
            await self.post(
                "/restore_session_memory",
                {
                    "session_id": session.session_id,
                    "messages": [
                        {"role": "user", "content": memory},
                        {"role": "assistant", "content": MEMORY_ACK},
                    ],
                    "age": age,
                },
            )
        return session

    async def post(
        self,
        path: str,
        body: dict[str, Any],
        *,
        params: dict[str, str] | None = None,
        answer_field: str | None = None,
    ) -> dict[str, Any]:
        """POST with limits and retries; the JSON answer (checked for `answer_field`)."""
        url = f"{self.base}{path}"
        content = orjson.dumps(body)

        return await limited(
            lambda: self._post_once(url, content, params, answer_field),
            limiter=self.limiter,
            policy=self.retry_policy,
        )

    async def _post_once(
        self,
        url: str,
        content: bytes,
        params: dict[str, str] | None,
        answer_field: str | None,
    ) -> dict[str, Any]:
        client = self._clients.get()
        resp = await post(
            client,
            url,
            label=self.label,
            timeout=self.timeout,
            key=self._key,
            content=content,
            params=params,
        )
        if resp.status_code >= 400:
            raise ProviderError(
                f"{self.label}: HTTP {resp.status_code} from {url.rsplit('/', 1)[-1]}: "
                f"{redact(resp.text[:200], self._key)}",
                status=resp.status_code,
                retry_after=parse_retry_after(resp.headers),
            )
        if answer_field is None:
            return {}
        try:
            data = orjson.loads(resp.content)
        except orjson.JSONDecodeError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get(answer_field), str):
            raise ProviderError(
                f"{self.label}: answer without a string {answer_field!r} field "
                f"({redact(resp.text[:120], self._key)!r})",
                retryable=True,
            )
        return data

    async def aclose(self) -> None:
        await self._clients.aclose()
