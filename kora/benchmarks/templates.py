"""Prompt templates: one Jinja file per prompt under kora/benchmarks/v1/prompts/, rendered strictly.

A template defines `{% block system %}` and/or `{% block user %}`. An undefined variable
is an error, never an empty string, so an edited template cannot silently lose its input.
"""

from __future__ import annotations

import difflib
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import jinja2
from jinja2 import nodes
from pydantic import BaseModel

from kora.benchmarks.outcomes import Message
from kora.errors import ConfigError
from kora.llm.base import ChatMessage

# rendered from when no run says otherwise: the default version's templates
PROMPTS_DIR = Path(__file__).parent / "v1" / "prompts"


class TemplateError(ConfigError):
    """A prompt template that cannot render: the config's to fix, never one test's failure."""


@dataclass(frozen=True)
class Prompt:
    system: str | None
    user: str | None

    def messages(self) -> list[ChatMessage]:
        """The messages it is sent as: its user part, the only one (its system part goes
        as the system prompt)."""
        return [ChatMessage("user", self.user or "")]


@dataclass(frozen=True)
class Rendered:
    """One section of the output: a prompt and the schema its answer must follow."""

    name: str
    prompt: Prompt
    schema: type[BaseModel] | None = None


# The folder templates render from: the package's, or a run's `prompts_dir`. A context
# variable, so that the jobs a broker runs side by side (each in its own task) cannot
# change each other's.
_prompts_dir: ContextVar[Path] = ContextVar("prompts_dir", default=PROMPTS_DIR)


@contextmanager
def prompts_from(directory: Path | str | None) -> Iterator[None]:
    """Render from `directory` (a folder holding all the templates) inside this block."""
    folder = Path(directory) if directory is not None else PROMPTS_DIR
    if not folder.is_dir():
        raise FileNotFoundError(f"prompts folder {folder} does not exist")
    token = _prompts_dir.set(folder)
    try:
        yield
    finally:
        _prompts_dir.reset(token)


def template_path(stem: str, directory: Path | None = None) -> Path:
    return (directory or _prompts_dir.get()) / f"{stem}.jinja"


class _Undefined(jinja2.StrictUndefined):
    """A name a template uses that is not there: an error naming the one it nearly is."""

    @property
    def _undefined_message(self) -> str:
        found, name = self._undefined_obj, str(self._undefined_name)
        if found is jinja2.utils.missing:
            return super()._undefined_message
        near = difflib.get_close_matches(name, [n for n in dir(found) if n[0] != "_"], 1)
        guess = "".join(f" (did you mean {n!r}?)" for n in near)
        return f"a {type(found).__name__} has no field {name!r}{guess}"


@cache
def _env(directory: str) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(directory),
        undefined=_Undefined,
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )


_ALLOWED_AT_TOP = (nodes.Block, nodes.Assign, nodes.Macro, nodes.Import, nodes.FromImport)


# each version of a template file (path, mtime, size), checked and compiled once: a run
# renders one for every call it makes
_loaded: dict[tuple[str, int, int], jinja2.Template] = {}


def _template(env: jinja2.Environment, path: Path) -> jinja2.Template:
    st = path.stat()
    version = (str(path), st.st_mtime_ns, st.st_size)
    found = _loaded.get(version)
    if found is None:
        _check_blocks(env, path)
        found = env.get_template(path.name)
        # a plain dict of the template's globals, not jinja's ChainMap over the
        # environment's: every render copies them, and a ChainMap copies 5 times slower
        found.globals = dict(found.globals)
        _loaded[version] = found
    return found


def _check_blocks(env: jinja2.Environment, path: Path) -> None:
    """Only blocks (and set/macro/import) at the top level: text there renders nowhere,
    so an edit placed outside `{% block %}` would silently change nothing."""
    source = path.read_text()
    for node in env.parse(source, path.name, str(path)).body:
        if isinstance(node, _ALLOWED_AT_TOP):
            continue
        if isinstance(node, nodes.Output) and all(
            isinstance(part, nodes.TemplateData) and not part.data.strip() for part in node.nodes
        ):
            continue
        line = node.lineno
        if isinstance(node, nodes.Output):
            # the first part that is not blank: leading newlines belong to the line before
            for part in node.nodes:
                if not (isinstance(part, nodes.TemplateData) and not part.data.strip()):
                    line = part.lineno
                    if isinstance(part, nodes.TemplateData):
                        line += len(part.data) - len(part.data.lstrip("\n"))
                    break
        raise TemplateError(
            f"prompt template {path}, line {line}: text outside {{% block system %}} / "
            "{% block user %} is never sent; move it inside a block"
        )


def render(stem: str, directory: Path | None = None, **variables: object) -> Prompt:
    path = template_path(stem, directory)
    env = _env(str(path.parent))
    tmpl = None
    try:
        tmpl = _template(env, path)
        ctx = tmpl.new_context(variables)
        parts: dict[str, str | None] = {}
        for name in ("system", "user"):
            block = tmpl.blocks.get(name)
            parts[name] = "".join(block(ctx)).strip() if block is not None else None
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"prompt template {path}, line {exc.lineno}: {exc.message}") from None
    except (jinja2.TemplateError, TypeError, ValueError) as exc:  # an undefined variable, say
        # the template's line, where its compiled code is in the traceback
        lines = [
            n
            for f, n in traceback.walk_tb(exc.__traceback__)
            if tmpl is not None and f.f_code.co_filename == tmpl.filename
        ]
        line = f", line {tmpl.get_corresponding_lineno(lines[-1])}" if tmpl and lines else ""
        raise TemplateError(f"prompt template {path}{line}: {exc}") from None
    return Prompt(system=parts["system"] or None, user=parts["user"] or None)


def format_conversation(messages: Sequence[ChatMessage | Message]) -> str:
    """The transcript as the judges and the simulated child read it."""
    return "\n\n".join(f"{'CHILD' if m.role == 'user' else 'AI'}: {m.content}" for m in messages)
