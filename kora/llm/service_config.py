"""Chat services as targets, described in config.yaml rather than in code.

`provider: http` describes the requests of one test's session: an optional `open` (to
start a session on the service), an optional `memory` (sent after `open` when the
scenario has memory), one `turn` per child message, an optional `close`. Each request
has a method, a URL (relative ones are joined to `base_url`), headers and a body whose
strings are Jinja templates, rendered strictly (an unknown variable is an error). A string
that is a single `{{ expression }}` keeps the expression's type, so
`messages: "{{ messages }}"` sends the transcript as a JSON list and `age: "{{ age }}"`
a number. Header values may name environment variables, `${NAME}`, read when a request
is sent and never written anywhere.

`provider: chat-endpoint` (the MyDD contract) and `provider: app-runner` (the canonical
KORA's app runners) are the same machinery with the requests fixed: `spec_for` builds
their description. The variables a template can use are `TEMPLATE_VARIABLES`.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import jinja2
import jinja2.sandbox
from pydantic import BaseModel, ConfigDict, Field

# A deployed chat endpoint takes one age, not a range (spec section 6): the middle of it.
AGE_FOR_RANGE: dict[str, int] = {"7to9": 8, "10to12": 11, "13to17": 15}

# what a request's templates can use (described in README "Any chat service as a target")
TEMPLATE_VARIABLES = {
    "message": "the child's newest message",
    "messages": "the whole transcript so far, a list of {role, content}, newest last",
    "age": "the child's age in years (the middle of the age range), a number",
    "age_range": "7to9, 10to12 or 13to17",
    "system": "the system prompt of the test's prompt variant (default or child)",
    "variant": "default or child",
    "memory": "what the scenario says the assistant remembers of the child, or empty",
    "session_id": "the session's id: made up per test, or read from the `open` answer",
    "test_key": "the test's key (risk, age range, scenario id, variant)",
    "run_id": "an id of this job, the same for all its tests",
    "turn": "the turn's number, from 1",
    "outcome": "in `close`: completed or errored",
    "app": "an app-runner model's `app`",
}

ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SINGLE_EXPRESSION = re.compile(r"^\s*\{\{(.*)\}\}\s*$", re.S)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class RequestSpec(_Strict):
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    # JSON: a mapping or list whose strings are templates; a string: sent as text
    body: Any = None
    # paths into the JSON answer (`choices.0.message.content`); `reply: null` on a turn:
    # the whole answer body is the reply, as text
    reply: str | None = None
    session_id: str | None = None
    blocked: str | None = None
    input_tokens: str | None = None
    output_tokens: str | None = None


class HttpSpec(_Strict):
    headers: dict[str, str] = Field(default_factory=dict)  # sent with every request
    open: RequestSpec | None = None
    memory: RequestSpec | None = None
    turn: RequestSpec
    close: RequestSpec | None = None

    def requests(self) -> dict[str, RequestSpec]:
        steps = {"open": self.open, "memory": self.memory, "turn": self.turn}
        steps["close"] = self.close
        return {k: v for k, v in steps.items() if v is not None}


MEMORY_ACK = "I'll keep that in mind."

# The MyDD contract (spec section 6): the service keeps the history under a session id we
# make up; memory is restored as a user/assistant exchange before the first turn.
CHAT_ENDPOINT = HttpSpec(
    memory=RequestSpec(
        url="/restore_session_memory",
        body={
            "session_id": "{{ session_id }}",
            "messages": [
                {"role": "user", "content": "{{ memory }}"},
                {"role": "assistant", "content": MEMORY_ACK},
            ],
            "age": "{{ age }}",
        },
    ),
    turn=RequestSpec(
        url="/query_chat_langchain_mem?session_id={{ session_id | urlencode }}",
        body={"prompt": "{{ message }}", "age": "{{ age }}"},
        reply="response",
    ),
)

# The canonical KORA's web and native app runners (packages/cli/src/models/*RunnerModel.ts).
APP_RUNNER = HttpSpec(
    open=RequestSpec(
        url="/sessions",
        body={"runId": "{{ run_id }}", "testKey": "{{ test_key }}", "app": "{{ app }}"},
        session_id="sessionId",
        blocked="blockedReason",
    ),
    turn=RequestSpec(
        url="/sessions/{{ session_id | urlencode }}/turn",
        body={"userMessage": "{{ message }}"},
        reply="assistantMessage",
        blocked="blockedReason",
    ),
    close=RequestSpec(
        method="DELETE",
        url="/sessions/{{ session_id | urlencode }}",
        body={"outcome": "{{ outcome }}"},
    ),
)


def environment() -> jinja2.Environment:
    """Templates from a config file: sandboxed, strict, no HTML escaping (bodies are JSON,
    encoded after rendering)."""
    return jinja2.sandbox.SandboxedEnvironment(
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True
    )


def template_problems(spec: HttpSpec, where: str) -> list[str]:
    """Each template of `spec` that does not compile or names an unknown variable."""
    from jinja2 import meta

    env = environment()
    out: list[str] = []

    def check(text: str, loc: str) -> None:
        try:
            names = meta.find_undeclared_variables(env.parse(text))
        except jinja2.TemplateSyntaxError as exc:
            out.append(f"{loc}: template error: {exc.message}")
            return
        for n in sorted(names - set(TEMPLATE_VARIABLES)):
            out.append(f"{loc}: unknown variable {n!r} (known: {', '.join(TEMPLATE_VARIABLES)})")

    def walk(value: Any, loc: str) -> None:
        if isinstance(value, str):
            check(value, loc)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{loc}.{k}")
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{loc}[{i}]")

    for step, req in spec.requests().items():
        loc = f"{where}.{step}"
        check(req.url, f"{loc}.url")
        walk(req.body, f"{loc}.body")
    return out


def spec_for(provider: str, http: HttpSpec | None) -> HttpSpec:
    if provider == "chat-endpoint":
        return CHAT_ENDPOINT
    if provider == "app-runner":
        return APP_RUNNER
    if http is None:
        raise ValueError("an http model needs an `http` section")
    return http


def is_single_expression(text: str) -> str | None:
    """The expression of a template that is exactly one `{{ ... }}`, else None."""
    m = _SINGLE_EXPRESSION.match(text)
    if m is None or "{{" in m.group(1) or "}}" in m.group(1):
        return None
    return m.group(1)
