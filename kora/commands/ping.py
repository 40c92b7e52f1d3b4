"""`kora ping TARGET`: does the config reach the service? One harmless message, in seconds.

The target gets one child message (the `child` variant's system prompt for a 10-12 year
old where the target runs that variant); the child and judge models get a one-word
question. Each line says what came back and how long it took; for a chat service
(`http`, `chat-endpoint`, `app-runner`) every request is shown as it was sent, secrets
masked. What a server sent is printed without anything a terminal would act on
(kora.llm.masking.terminal_safe): no escape sequence can clear the screen or retitle the
window. Nothing is stored and nothing is written: a ping is not part of a run.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kora.commands.common import configfile_option
from kora.config.schema import KoraConfig, chain
from kora.errors import ConfigError
from kora.llm.base import ChatMessage, ProviderError
from kora.llm.retry import RetryPolicy
from kora.llm.usage import Usage

PING_MESSAGE = "hi! can you tell me one fun fact about octopuses?"
PING_QUESTION = "Reply with the single word: ready"
PING_AGE_RANGE = "10to12"
# a ping answers quickly or says why not: two attempts, short waits
PING_RETRY = RetryPolicy(attempts=2, initial=0.5, maximum=2.0, total=15.0, unreachable_total=3.0)
PING_TIMEOUT = 20.0


@dataclass
class Pong:
    role: str
    model: str
    ok: bool
    seconds: float
    text: str


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def ping_target(cfg: KoraConfig, target: str, out: list[str]) -> Pong:
    from kora.llm.limits import Limiter
    from kora.run.stages.converse import target_system_prompt_for

    model = cfg.targets[target].model
    if model is None:
        raise ConfigError(f"target {target!r} has imported conversations: nothing to ping")
    mc = cfg.models[model].model_copy(
        update={"timeout": min(cfg.models[model].timeout or PING_TIMEOUT, PING_TIMEOUT)}
    )
    variants = cfg.target_prompts(target)
    variant = "child" if "child" in variants else "default"
    age = PING_AGE_RANGE if variant == "child" else None
    system = target_system_prompt_for(age, None)
    started = time.monotonic()
    if mc.is_service:
        from kora.llm.service import ServiceTarget

        service = ServiceTarget(model, mc, limiter=Limiter(None, None), retry_policy=PING_RETRY)
        service.record = True
        try:
            session = await service.open_session(
                age, None, system, variant=variant, test_key="kora-ping"
            )
            reply = await session.reply([ChatMessage("user", PING_MESSAGE)])
            await session.close("completed")
            return Pong("target", model, True, time.monotonic() - started, reply.text)
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
    reply_text = await _ask(model, mc, [ChatMessage("user", PING_MESSAGE)], system)
    return Pong("target", model, True, time.monotonic() - started, reply_text)


async def _ask(name: str, config: object, messages: list[ChatMessage], system: str | None) -> str:
    from kora.llm.client import ModelClient
    from kora.llm.config import ModelConfig
    from kora.llm.limits import Limiter

    assert isinstance(config, ModelConfig)
    client = ModelClient(
        name,
        config,
        cache=None,
        usage=Usage(),
        limiter=Limiter(None, None),
        retry_policy=PING_RETRY,
    )
    try:
        return await client.text(messages, stage="ping", system=system, max_tokens=200)
    finally:
        await client.aclose()


async def ping_model(cfg: KoraConfig, role: str, model: str) -> Pong:
    mc = cfg.models[model]
    mc = mc.model_copy(update={"timeout": min(mc.timeout or PING_TIMEOUT, PING_TIMEOUT)})
    started = time.monotonic()
    text = await _ask(model, mc, [ChatMessage("user", PING_QUESTION)], None)
    return Pong(role, model, True, time.monotonic() - started, text)


async def ping_all(cfg: KoraConfig, target: str, roles: bool) -> tuple[list[str], bool]:
    lines: list[str] = []
    ok = True
    checks: list[tuple[str, str | None]] = [("target", cfg.targets[target].model)]
    if roles:
        checks += [("child", m) for m in chain(cfg.user_model)]
        checks += [("judge", j) for j in cfg.judges]
    seen: set[str] = set()
    for role, model in checks:
        if model is None or (role != "target" and model in seen):
            continue
        seen.add(model)
        detail: list[str] = []
        started = time.monotonic()
        try:
            if role == "target":
                pong = await ping_target(cfg, target, detail)
            else:
                pong = await ping_model(cfg, role, model)
            lines.append(
                f"{role} {model}: ok in {pong.seconds:.2f} s: {_short(pong.text) or '(empty)'}"
            )
        except (ProviderError, ValueError) as exc:
            ok = False
            lines.append(f"{role} {model}: FAILED after {time.monotonic() - started:.2f} s: {exc}")
        lines += detail
    return lines, ok


def register(sub: Any) -> None:
    pg = sub.add_parser(
        "ping",
        help="send one harmless message to a target (and its child and judge models): "
        "does the config reach them?",
    )
    pg.add_argument("target", nargs="?", help="the target's name in the config")
    configfile_option(pg)
    pg.add_argument("--target-only", action="store_true", help="skip the child and judge models")
    pg.set_defaults(func=cmd_ping)


def cmd_ping(args: argparse.Namespace) -> int:
    from kora.commands.common import split_overlays
    from kora.config.files import load_run_config

    overlays, targets = split_overlays(args.configfile, [args.target] if args.target else [])
    if len(targets) != 1:
        raise ConfigError("kora ping takes one target: kora ping TARGET [--configfile FILE ...]")
    cfg, _ = load_run_config(overlays, workdir=Path("."))
    target = targets[0]
    if target not in cfg.targets:
        raise ConfigError(
            f"unknown target {target!r}; the config defines: "
            + (", ".join(cfg.targets) or "no targets")
        )
    from kora.llm.masking import terminal_safe

    lines, ok = asyncio.run(ping_all(cfg, target, not args.target_only))
    for line in lines:
        print(terminal_safe(line))
    if not ok:
        print("kora ping: a model could not be reached or answered wrongly", file=sys.stderr)
    return 0 if ok else 1
