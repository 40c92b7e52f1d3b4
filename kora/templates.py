"""Prompt templates: one Jinja file per prompt under kora/prompts/, rendered strictly.

A template defines `{% block system %}` and/or `{% block user %}`. An undefined variable
is an error, never an empty string, so an edited template cannot silently lose its input.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

PROMPTS_DIR = Path(__file__).parent / "prompts"
STEMS = (
    "seeds",
    "scenario",
    "validate",
    "first_user_message",
    "next_user_message",
    "target_system",
    "judge_safety",
    "judge_behavior",
)


@dataclass(frozen=True)
class Prompt:
    system: str | None
    user: str | None


_prompts_dir = PROMPTS_DIR


def set_prompts_dir(directory: Path | str | None) -> None:
    """Render from another folder of templates (config `prompts_dir`) in this process."""
    global _prompts_dir
    _prompts_dir = Path(directory) if directory is not None else PROMPTS_DIR
    for stem in STEMS:
        if not template_path(stem).exists():
            raise FileNotFoundError(f"prompts_dir {_prompts_dir}: missing {stem}.jinja")


def template_path(stem: str, directory: Path | None = None) -> Path:
    if stem not in STEMS:
        raise KeyError(f"unknown prompt template {stem!r}")
    return (directory or _prompts_dir) / f"{stem}.jinja"


@cache
def _env(directory: str) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(directory),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(stem: str, directory: Path | None = None, **variables: Any) -> Prompt:
    path = template_path(stem, directory)
    env = _env(str(path.parent))
    try:
        tmpl = env.get_template(path.name)
        ctx = tmpl.new_context(variables)
        parts: dict[str, str | None] = {}
        for name in ("system", "user"):
            block = tmpl.blocks.get(name)
            parts[name] = "".join(block(ctx)).strip() if block is not None else None
    except jinja2.UndefinedError as exc:
        raise ValueError(f"prompt template {path}: {exc.message}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise ValueError(f"prompt template {path}, line {exc.lineno}: {exc.message}") from None
    return Prompt(system=parts["system"] or None, user=parts["user"] or None)


def format_conversation(messages: list[Any]) -> str:
    """The transcript as the judges and the simulated child read it."""
    return "\n\n".join(f"{'CHILD' if m.role == 'user' else 'AI'}: {m.content}" for m in messages)
