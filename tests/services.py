"""Chat services of the shapes docs/targets-and-services.md describes, as loopback servers.

- `StatelessChatServer` (config/examples/stateless-json.yaml): no history on the server;
  every turn carries the transcript; bearer token required.
- `SessionChatServer` (config/examples/session-api.yaml): sessions opened, remembered and
  closed on the server; a custom key header required; it checks that no session is used
  by two tests and that turns arrive in order.
- `AppRunnerServer` (config/examples/app-runner.yaml): the canonical KORA's app-runner
  protocol; apps can be blocked per test.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from tests.loopback import LoopbackServer, Recorded, Reply


class StatelessChatServer(LoopbackServer):
    def __init__(self, *, token: str = "stateless-secret", **kw: Any) -> None:
        super().__init__(**kw)
        self.token = token

    def handle(self, rec: Recorded, *, invalid: bool) -> Reply:
        if rec.headers.get("authorization") != f"Bearer {self.token}":
            return Reply.json(401, {"error": "bad token"})
        if rec.method != "POST" or rec.path != "/v1/respond":
            return Reply.json(404, {"error": f"no route {rec.method} {rec.path}"})
        body = rec.body if isinstance(rec.body, dict) else {}
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or messages[-1].get("role") != "user":
            return Reply.json(422, {"error": "messages must end with a user message"})
        age = body.get("user_age")
        if age is not None and not isinstance(age, int):
            return Reply.json(422, {"error": "user_age must be a number"})
        turn = sum(1 for m in messages if m.get("role") == "user")
        text = f"turn {turn} of {len(messages)} messages (age {age}): {messages[-1]['content']}"
        return Reply.json(
            200, {"output": {"text": text}, "usage": {"input": 10 * turn, "output": 7}}
        )


@dataclass
class Session:
    age: Any
    ref: str
    memory: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    closed: bool = False


class SessionChatServer(LoopbackServer):
    def __init__(self, *, key: str = "session-secret", **kw: Any) -> None:
        super().__init__(**kw)
        self.key = key
        self.sessions: dict[str, Session] = {}
        self.problems: list[str] = []
        self._ids = itertools.count(1)

    def handle(self, rec: Recorded, *, invalid: bool) -> Reply:
        if rec.headers.get("x-api-key") != self.key:
            return Reply.json(403, {"error": "bad key"})
        body = rec.body if isinstance(rec.body, dict) else {}
        parts = rec.path.strip("/").split("/")
        with self.lock:
            if rec.method == "POST" and parts == ["api", "sessions"]:
                ref = str(body.get("client_ref", ""))
                if any(s.ref == ref for s in self.sessions.values()):
                    self.problems.append(f"a second session for test {ref}")
                sid = f"s{next(self._ids)}"
                self.sessions[sid] = Session(body.get("age"), ref)
                return Reply.json(201, {"session": {"id": sid}})
            if len(parts) < 3 or parts[:2] != ["api", "sessions"] or parts[2] not in self.sessions:
                return Reply.json(404, {"error": f"no session at {rec.path}"})
            s = self.sessions[parts[2]]
            if s.closed:
                self.problems.append(f"{parts[2]} used after it was closed")
            if rec.method == "DELETE" and len(parts) == 3:
                s.closed = True
                return Reply.json(200, {"closed": True})
            if rec.method == "POST" and parts[3:] == ["memory"]:
                s.memory.append(str(body.get("facts")))
                return Reply.json(200, {"ok": True})
            if rec.method == "POST" and parts[3:] == ["messages"]:
                s.texts.append(str(body.get("text")))
                n = len(s.texts)
                return Reply.json(200, {"reply": {"text": f"{parts[2]} turn {n}: {s.texts[-1]}"}})
        return Reply.json(404, {"error": f"no route {rec.method} {rec.path}"})


class AppRunnerServer(LoopbackServer):
    """Blocks the tests whose testKey contains a key of `block_open` when the session is
    opened, and those with a key of `block_turn` at their second turn."""

    def __init__(
        self,
        *,
        token: str | None = None,
        block_open: dict[str, str] | None = None,
        block_turn: dict[str, str] | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.token = token
        self.block_open = block_open or {}
        self.block_turn = block_turn or {}
        self.sessions: dict[str, dict[str, Any]] = {}
        self.closed: dict[str, str] = {}
        self._ids = itertools.count(1)

    def handle(self, rec: Recorded, *, invalid: bool) -> Reply:
        if self.token and rec.headers.get("authorization") != f"Bearer {self.token}":
            return Reply.json(401, {"error": "bad token"})
        body = rec.body if isinstance(rec.body, dict) else {}
        parts = rec.path.strip("/").split("/")
        with self.lock:
            if rec.method == "POST" and parts == ["sessions"]:
                key = str(body.get("testKey", ""))
                for frag, reason in self.block_open.items():
                    if frag in key:
                        return Reply.json(200, {"blockedReason": reason})
                sid = f"app-{next(self._ids)}"
                self.sessions[sid] = {"key": key, "app": body.get("app"), "turns": []}
                return Reply.json(200, {"sessionId": sid})
            if len(parts) >= 2 and parts[0] == "sessions" and parts[1] in self.sessions:
                s = self.sessions[parts[1]]
                if rec.method == "POST" and parts[2:] == ["turn"]:
                    s["turns"].append(body.get("userMessage"))
                    for frag, reason in self.block_turn.items():
                        if frag in s["key"] and len(s["turns"]) == 2:
                            return Reply.json(200, {"blockedReason": reason})
                    n = len(s["turns"])
                    return Reply.json(200, {"assistantMessage": f"{s['app']} reply {n}"})
                if rec.method == "DELETE" and len(parts) == 2:
                    self.closed[parts[1]] = str(body.get("outcome"))
                    return Reply.json(200, {})
        return Reply.json(404, {"error": f"no route {rec.method} {rec.path}"})
