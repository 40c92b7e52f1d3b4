"""Chat services as targets, described in config.yaml rather than in code.

`provider: http` describes the requests of one test's session: an optional `open` (to
start a session on the service), an optional `memory` (sent after `open` when the
scenario has memory), one `turn` per child message, an optional `close`. Each request
has a method, a URL (relative ones are joined to `base_url`), headers and a body whose
strings are Jinja templates, rendered strictly (an unknown variable is an error). A string
that is a single `{{ expression }}` keeps the expression's type, so
`messages: "{{ messages }}"` sends the transcript as a JSON list and `age: "{{ age }}"`
a number. Header values may name environment variables, `${NAME}`, read when a request
is sent and never written anywhere. Such an expression must give something JSON can carry
(text, a number, true/false, null, a list, a mapping with text keys), and one in a URL
text or a number: a function (`{{ messages.append }}`) or an iterator (`{{ messages |
map(attribute='role') }}` without `| list`) is a config error naming the model and key,
found by `kora check-config` (each such template is tried on sample values,
`sample_variables`) and, for a model made in code, when the request is rendered.

`provider: chat-endpoint` (the MyDD contract) and `provider: app-runner` (the canonical
KORA's app runners) are the same machinery with the requests fixed: `spec_for` builds
their description. The variables a template can use are `TEMPLATE_VARIABLES`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Literal

import jinja2
import jinja2.sandbox
from pydantic import BaseModel, ConfigDict, Field

# A deployed chat endpoint takes one age, not a range (spec section 6): the middle of it.
AGE_FOR_RANGE: dict[str, int] = {"7to9": 8, "10to12": 11, "13to17": 15}

# what a request's templates can use (described in docs/targets-and-services.md, "Any chat
# product as a target")
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


def sample_variables() -> dict[str, object]:
    """A value of each of TEMPLATE_VARIABLES, as a turn has them: what `kora check-config`
    tries a single-expression template on (a fresh copy: a template may change it)."""
    return {
        "message": "hi",
        "messages": [{"role": "user", "content": "hi"}],
        "age": 8,
        "age_range": "7to9",
        "system": "You are a helpful assistant.",
        "variant": "child",
        "memory": "",
        "session_id": "session",
        "test_key": "test",
        "run_id": "run",
        "turn": 1,
        "outcome": "completed",
        "app": "app",
    }


ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SINGLE_EXPRESSION = re.compile(r"^\s*\{\{(.*)\}\}\s*$", re.S)


class ConfigModel(BaseModel):
    """A mapping of config.yaml (kora.llm.settings.config, kora.config.schema use it too): strict,
    as YAML gives real types and `seeds_per_task: true` must not pass for 1; no unknown key."""

    model_config = ConfigDict(extra="forbid", strict=True)


class RequestSpec(ConfigModel):
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    # JSON: a mapping or list whose strings are templates; a string: sent as text
    body: object = None
    # paths into the JSON answer (`choices.0.message.content`); `reply: null` on a turn:
    # the whole answer body is the reply, as text
    reply: str | None = None
    session_id: str | None = None
    blocked: str | None = None
    input_tokens: str | None = None
    output_tokens: str | None = None


class HttpSpec(ConfigModel):
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

# The MyDD contract, `provider: chat-endpoint` (spec section 6): the service keeps each
# conversation's history on its side, keyed by a session id made up per test
# (`<uuid4>_<uuid4>`), and always receives the child's age. With a memory, `POST
# {base}/restore_session_memory` with `{"session_id", "messages": [user: memory,
# assistant: MEMORY_ACK], "age"}` before the first turn (its answer ignored); each turn,
# `POST {base}/query_chat_langchain_mem?session_id=<id>` with `{"prompt": <the newest user
# message only>, "age"}`, answered by JSON `{"response": ...}`. No system prompt is sent.
# config/examples/mydd.yaml writes the same out as `provider: http`.
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

    def check(text: str, loc: str, url: bool = False) -> None:
        try:
            names = meta.find_undeclared_variables(env.parse(text))
        except jinja2.TemplateSyntaxError as exc:
            out.append(f"{loc}: template error: {exc.message}")
            return
        unknown = sorted(names - set(TEMPLATE_VARIABLES))
        for n in unknown:
            out.append(f"{loc}: unknown variable {n!r} (known: {', '.join(TEMPLATE_VARIABLES)})")
        expr = is_single_expression(text)
        if expr is None or unknown:
            return
        try:
            value = env.compile_expression(expr, undefined_to_none=False)(**sample_variables())
            problem = value_problem(value, url=url)
        except Exception:
            return  # on these sample values only: rendering names it if it stays
        if problem:
            out.append(f"{loc}: {text!r} {problem}")

    def walk(value: object, loc: str) -> None:
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
        check(req.url, f"{loc}.url", url=True)
        walk(req.body, f"{loc}.body")
    return out


_INDEX = re.compile(r"-?[0-9]+\Z")  # ASCII digits: `isdigit` also takes ² and ٣


def find(data: object, path: str) -> object:
    """The value at a dotted path (`choices.0.message.content`); None when absent."""
    cur = data
    for part in path.split("."):
        if isinstance(cur, dict):
            cur = cur.get(part)
        elif isinstance(cur, list) and _INDEX.match(part) and -len(cur) <= int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return None
    return cur


# the services whose requests are a published contract, not described in the config
CONTRACTS = {"chat-endpoint": CHAT_ENDPOINT, "app-runner": APP_RUNNER}


def spec_for(provider: str, http: HttpSpec | None) -> HttpSpec:
    """A service's requests: its contract's, or (`http`) as its config describes them."""
    if provider in CONTRACTS:
        return CONTRACTS[provider]
    if http is None:
        raise ValueError("an http model needs an `http` section")
    return http


def is_single_expression(text: str) -> str | None:
    """The expression of a template that is exactly one `{{ ... }}`, else None."""
    m = _SINGLE_EXPRESSION.match(text)
    if m is None or "{{" in m.group(1) or "}}" in m.group(1):
        return None
    return m.group(1)


# the whole numbers JSON (orjson) carries: 64 bits, signed or not
INT_RANGE = (-(2**63), 2**64 - 1)
MAX_DEPTH = 100


def _what(value: object) -> str:
    if callable(value):
        return f"a function ({getattr(value, '__name__', type(value).__name__)})"
    if isinstance(value, Iterator):
        return f"an iterator ({type(value).__name__})"
    return f"a {type(value).__name__} object"


def _json_problem(value: object, depth: int) -> str | None:
    """What in `value` JSON cannot carry, or None."""
    if isinstance(value, jinja2.Undefined):
        str(value)  # StrictUndefined: raises, naming the variable
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return "text with a lone surrogate (not UTF-8)"
        return None
    if value is None or isinstance(value, (bool, float)):
        return None
    if isinstance(value, int):
        ok = INT_RANGE[0] <= value <= INT_RANGE[1]
        return None if ok else f"a whole number too large for JSON ({value})"
    if depth > MAX_DEPTH:
        return f"a value nested more than {MAX_DEPTH} deep (or one that holds itself)"
    if isinstance(value, (list, tuple)):
        return next(filter(None, (_json_problem(v, depth + 1) for v in value)), None)
    if isinstance(value, dict):
        key = next((k for k in value if not isinstance(k, str)), None)
        if key is not None:
            return f"a mapping with a key that is not text ({key!r})"
        return next(filter(None, (_json_problem(v, depth + 1) for v in value.values())), None)
    return _what(value)


def value_problem(value: object, *, url: bool = False) -> str | None:
    """Why the value of a single `{{ expression }}` cannot be sent (the end of a sentence
    that begins with the template), or None: a body's must be JSON, a URL's text or a
    number. Raises for an undefined variable (StrictUndefined), naming it."""
    if url:
        if isinstance(value, jinja2.Undefined):
            str(value)
        if isinstance(value, str) or (
            isinstance(value, (int, float)) and not isinstance(value, bool)
        ):
            return None
        what = _what(value) if callable(value) or isinstance(value, Iterator) else repr(value)
        return f"gives {what}, not text for a URL{_hint(value)}"
    problem = _json_problem(value, 0)
    if problem is None:
        return None
    return f"gives {problem}, not a value JSON can send{_hint(value)}"


def _hint(value: object) -> str:
    if callable(value):
        return " (call it with `()`, or name a value)"
    if isinstance(value, Iterator):
        return " (add `| list` to send its items as a list)"
    return ""
