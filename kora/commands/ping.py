"""`kora ping TARGET`: does the config reach the service, and does each role's model take
the calls a run will make? In seconds, for a hosted API.

The target gets one child message (the `child` variant's system prompt for a 10-12 year
old where the target runs that variant). Every model of the seed, expansion, child and
judge roles gets its role's real call, rendered for the example scenario
(docs/example-scenario.json): the seed, expansion and judge models a structured call with
their role's schema, sent the way the model's `structured_output` says; the child model
the first child message. Each line says what the server accepted (or why it refused, and
what to change) and whether the answer fits its schema; for a chat service (`http`,
`chat-endpoint`, `app-runner`) every request is shown as it was sent, secrets masked.
What a server sent is printed without anything a terminal would act on
(kora.llm.masking.terminal_safe): no escape sequence can clear the screen or retitle the
window. Nothing is stored and nothing is written: a ping is not part of a run.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from kora.commands.common import configfile_option
from kora.config.schema import KoraConfig, chain
from kora.errors import ConfigError
from kora.llm.base import ChatMessage, ProviderError
from kora.llm.masking import cut
from kora.llm.money.bill import BillWriter, bill_dir
from kora.llm.providers.structured import SENT_AS
from kora.llm.retry import RetryPolicy
from kora.llm.settings.config import ModelConfig, said_settings

if TYPE_CHECKING:
    from kora.benchmarks.taxonomy import Taxonomy
    from kora.benchmarks.templates import Rendered
    from kora.llm.client import ModelClient

PING_MESSAGE = "hi! can you tell me one fun fact about octopuses?"
PING_AGE_RANGE = "10to12"
# a ping answers quickly or says why not: two attempts, short waits
PING_RETRY = RetryPolicy(attempts=2, initial=0.5, maximum=2.0, total=15.0, unreachable_total=3.0)
# seconds a call may take, unless the model's `timeout` says (a local server may be slow)
PING_TIMEOUT = 20.0
# a structured call is the role's real one, but its answer is cut here: the ping checks
# what the server accepts, not the whole answer (a small local model writes slowly)
PING_MAX_TOKENS = 512
PING_STRUCTURED_TIMEOUT = 90.0
# the role's call, as rendered by kora.benchmarks.showcase for the example scenario
ROLE_CALLS = {
    "seed": "seeds",
    "expansion": "scenario",
    "child": "first_user_message",
    "judge": "judge_safety",
}
EXAMPLE = Path("docs") / "example-scenario.json"


def _short(text: str, limit: int = 300) -> str:
    return cut(" ".join(text.split()), limit)  # on one line


async def ping_target(cfg: KoraConfig, target: str, out: list[str]) -> str:
    """The target's answer to the ping's message; a chat service's requests in `out`."""
    from kora.benchmarks.converse import target_system_prompt_for
    from kora.llm.limits import Limiter

    model = cfg.targets[target].model
    if model is None:
        raise ConfigError(f"target {target!r} has imported conversations: nothing to ping")
    mc = cfg.models[model].model_copy(update={"timeout": cfg.models[model].timeout or PING_TIMEOUT})
    variants = cfg.target_prompts(target)
    variant = "child" if "child" in variants else "default"
    age = PING_AGE_RANGE if variant == "child" else None
    system = target_system_prompt_for(age, None)
    if mc.is_service:
        from kora.llm.providers.service import ServiceTarget

        service = ServiceTarget(model, mc, limiter=Limiter(None, None), retry_policy=PING_RETRY)
        service.record = True
        try:
            session = await service.open_session(
                age, None, system, variant=variant, test_key="kora-ping"
            )
            reply = await session.reply([ChatMessage("user", PING_MESSAGE)])
            if _BILL:  # in the bill as the run's turns are (kora.llm.targets)
                _BILL[-1].charge(model, "target", reply, None)
            await session.close("completed")
            return reply.text
        finally:
            for s in service.sent:
                out.append(f"    {s.method} {s.url} -> {s.status} in {s.seconds or 0:.2f} s")
                for k, v in s.headers.items():
                    out.append(f"      {k}: {v}")
                if s.body is not None:
                    out.append(f"      body: {_short(s.body, 500)}")
                if s.answer:
                    out.append(f"      answer: {_short(s.answer, 500)}")
            await service.aclose()
    return await _ask(model, mc, [ChatMessage("user", PING_MESSAGE)], system)


# a ping's calls are paid like any: written in the workspace's bill (ping_all sets it)
_BILL: list[BillWriter] = []


def _client(name: str, config: ModelConfig) -> ModelClient:
    from kora.llm.client import ModelClient
    from kora.llm.limits import Limiter
    from kora.llm.providers.factories import Shared

    return ModelClient(
        name,
        config,
        Shared(bill=_BILL[-1] if _BILL else None),
        limiter=Limiter(None, None),
        retry_policy=PING_RETRY,
    )


async def _ask(
    name: str, config: ModelConfig, messages: list[ChatMessage], system: str | None
) -> str:
    client = _client(name, config)
    try:
        return await client.text(messages, stage="ping", system=system, max_tokens=200)
    finally:
        await client.aclose()


def role_calls(cfg: KoraConfig, taxonomy: Taxonomy) -> dict[str, Rendered]:
    """Each role's call as a run makes it, rendered for the example scenario."""
    from kora import benchmarks
    from kora.benchmarks.schemas import Scenario
    from kora.benchmarks.showcase import rendered_prompts

    found = [p for p in (EXAMPLE, Path(__file__).resolve().parents[2] / EXAMPLE) if p.is_file()]
    if not found:
        raise ConfigError(
            f"kora ping renders the roles' calls for {EXAMPLE}: run it in the project"
        )
    scenario = Scenario.model_validate(orjson.loads(found[0].read_bytes()))
    rendered = rendered_prompts(benchmarks.get(cfg.benchmark), scenario, taxonomy)
    by_name = {r.name: r for r in rendered}
    return {role: by_name[name] for role, name in ROLE_CALLS.items()}


def sent_as(config: ModelConfig) -> str:
    """How a model's structured calls go out, in a user's words."""
    if config.kind.offline:
        return "answered offline"
    if not config.kind.structured_modes:  # with thinking on, the API refuses a forced one
        return "a tool call offered" if config.thinking_tokens else "a forced tool call"
    responses = config.api == "responses"
    sent = "the Responses API's text.format" if responses else SENT_AS[str(config.structured_mode)]
    if config.schema_bounds == "minimums":
        return f"{sent}, without the schema's upper length and count bounds"
    return sent if config.schema_bounds else f"{sent}, without the schema's length and count bounds"


async def ping_structured(name: str, config: ModelConfig, call: Rendered) -> str:
    """The role's structured call: what the server accepted, and whether the answer fits."""
    from kora.llm.answers import parse_answer

    assert call.schema is not None
    # a model's own timeout holds (a local server may be slow); else a ping's
    config = config.model_copy(update={"timeout": config.timeout or PING_STRUCTURED_TIMEOUT})
    client = _client(name, config)
    request = client.request(
        [ChatMessage("user", call.prompt.user or "")],
        system=call.prompt.system,
        schema=call.schema,
        max_tokens=min(config.max_tokens or PING_MAX_TOKENS, PING_MAX_TOKENS),
    )
    try:
        resp = await client.call(request, stage="ping")
    finally:
        await client.aclose()
    schema, sent = call.schema.__name__, sent_as(config)
    what = f"{schema} {sent}" if config.kind.offline else f"{schema} sent as {sent}: accepted"
    parsed = parse_answer(call.schema, resp.text)
    if not isinstance(parsed, str):
        return f"{what}; the answer fits the schema"
    if resp.finish_reason == "max_tokens":
        return f"{what}; the answer was cut at the ping's {PING_MAX_TOKENS} tokens (not checked)"
    return (
        f"{what}; but {_short(parsed, 200)} (a run asks once more with the errors, then "
        "fails the item: a model this weak may not fill the role)"
    )


async def ping_role(cfg: KoraConfig, role: str, model: str, calls: dict[str, Rendered]) -> str:
    mc, call = cfg.models[model], calls[role]
    if call.schema is not None:
        return await ping_structured(model, mc, call)
    mc = mc.model_copy(update={"timeout": mc.timeout or PING_TIMEOUT})
    user = [ChatMessage("user", call.prompt.user or "")]
    return "text call: " + await _ask(model, mc, user, call.prompt.system)


async def ping_all(
    cfg: KoraConfig, target: str, roles: bool, taxonomy: Taxonomy | None = None
) -> tuple[list[str], int, int]:
    """What each model answered, in lines; how many failed, and how many were not sent."""
    lines: list[str] = []
    failed = unsent = 0
    _BILL[:] = [BillWriter(bill_dir(Path(cfg.cache_dir)), "ping")]
    checks: list[tuple[str, str | None]] = [("target", cfg.targets[target].model)]
    calls: dict[str, Rendered] = {}
    if roles:
        assert taxonomy is not None
        calls = role_calls(cfg, taxonomy)
        checks += [("seed", m) for m in chain(cfg.seed_model)]
        checks += [("expansion", m) for m in chain(cfg.expand_model)]
        checks += [("child", m) for m in chain(cfg.user_model)]
        checks += [("judge", j) for j in cfg.judges]
    from kora.run.preflight import missing_keys

    seen: set[tuple[str, str]] = set()
    for role, model in checks:
        if model is None or (role, model) in seen:
            continue
        seen.add((role, model))
        # a key the environment lacks: said before any request, none is sent
        missing = missing_keys(cfg, [model])
        if missing:
            unsent += 1
            lines.append(f"{role} {model}: not sent: set {', '.join(missing)} first")
            continue
        detail: list[str] = []
        started = time.monotonic()
        # the settings only its kind takes (a reasoning effort, a thinking budget, ...): tried
        tried = said_settings(dict(cfg.models[model]))
        who = f"{role} {model}" + (f" ({tried})" if tried else "")
        try:
            if role == "target":
                text = await ping_target(cfg, target, detail)
            else:
                text = await ping_role(cfg, role, model, calls)
            seconds = time.monotonic() - started
            lines.append(f"{who}: ok in {seconds:.2f} s: {_short(text) or '(empty)'}")
        except (ProviderError, ValueError) as exc:
            failed += 1
            lines.append(f"{who}: FAILED after {time.monotonic() - started:.2f} s: {exc}")
        lines += detail
    return lines, failed, unsent


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pg = sub.add_parser(
        "ping",
        help="send one harmless message to a target, and each role's real call to the "
        "seed, expansion, child and judge models: does the config reach them, and what "
        "do their servers accept?",
        description="Check, in seconds, that the config reaches every model a run uses: "
        "one harmless child message to the target, and each role's real call to its "
        "model, each structured answer checked against its schema.",
    )
    pg.add_argument("target", nargs="?", help="the target's name in the config")
    configfile_option(pg)
    pg.add_argument(
        "--target-only",
        action="store_true",
        help="skip the seed, expansion, child and judge models",
    )
    pg.set_defaults(func=cmd_ping)


def cmd_ping(args: argparse.Namespace) -> int:
    from kora.commands.common import given_values, named_targets
    from kora.config.files import load_run_config

    targets = named_targets(args, [args.target] if args.target else [])
    if len(targets) != 1:
        raise ConfigError("kora ping takes one target: kora ping TARGET [--configfile FILE ...]")
    cfg, taxonomy = load_run_config(args.configfile, workdir=Path("."), given=given_values(args))
    from kora.llm.masking import terminal_safe

    lines, failed, unsent = asyncio.run(ping_all(cfg, targets[0], not args.target_only, taxonomy))
    for line in lines:
        print(terminal_safe(line))
    if failed:
        print("kora ping: a model could not be reached or answered wrongly", file=sys.stderr)
    elif unsent:
        print("kora ping: nothing was sent to a model whose key is not set", file=sys.stderr)
    return 1 if failed or unsent else 0
