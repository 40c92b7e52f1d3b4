"""A result's config as it may be published: what the run used for one target, with
nothing that opens a door.

A result's manifest and bundle carry the config that made it, so a reader sees every
setting and `kora replay` can run it again. Keys are read from environment variables and
never sit in the config, but a config can still hold a credential: a chat service's
header written out literally, a password inside a URL, a token in a query string. Those
are replaced by `****`; so is any copy of the value of a variable the run reads its keys
from, wherever it sits.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from kora.config.schema import KoraConfig, chain
from kora.llm.masking import MASK, Masker
from kora.llm.settings.service_config import ENV_REF  # `${NAME}`: read from the environment

# header and query names whose literal values are credentials
_SECRET_NAME = re.compile(r"auth|key|token|secret|pass|cookie|session|sig|credential", re.I)


def result_models(config: KoraConfig, target: str) -> list[str]:
    """The models a target's result rests on: its own, the roles' and the judges'."""
    names = [config.targets[target].model]
    names += chain(config.seed_model) + chain(config.expand_model) + chain(config.user_model)
    names += list(config.judges)
    return list(dict.fromkeys(n for n in names if n is not None))


def _url(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
    query = parts.query
    if query and "{" not in query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, MASK if _SECRET_NAME.search(k) else v) for k, v in pairs])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _headers(headers: dict[str, str]) -> dict[str, str]:
    out = {}
    for name, value in headers.items():
        literal = ENV_REF.sub("", value).strip()
        # a value that only names variables (and a scheme word) holds no secret itself
        only_refs = literal in ("", "Bearer", "Basic", "Token", "Bot")
        out[name] = value if only_refs or not _SECRET_NAME.search(name) else MASK
    return out


def _env_secrets(config: KoraConfig, models: list[str]) -> set[str]:
    """The values of the variables the run reads keys and header values from."""
    names: set[str] = set()
    for name in models:
        m = config.models[name]
        if m.api_key_env or m.kind.key_env:
            names.add(m.api_key_env or m.kind.key_env or "")
        if m.http is not None:
            names.update(ENV_REF.findall(m.http.model_dump_json()))
    return {v for n in names if (v := os.environ.get(n))}


def _masked(value: Any, masker: Masker, key: str = "") -> Any:
    """`value` with credentials masked: in URLs and headers by where they stand, and
    every known secret's value wherever it appears."""
    if isinstance(value, dict):
        if key == "headers":
            shown = _headers({str(k): str(v) for k, v in value.items()})
            return {k: masker.mask(v) for k, v in shown.items()}
        return {k: _masked(v, masker, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v, masker, key) for v in value]
    if isinstance(value, str):
        return masker.mask(_url(value) if key in ("base_url", "url") else value)
    return value


def public_config(config: KoraConfig, target: str) -> dict[str, Any]:
    """The config of `target`'s result: every key the run had, its targets narrowed to
    this one and its models to those the result rests on, credentials masked."""
    models = result_models(config, target)
    doc = config.model_dump(mode="json", exclude_none=True)
    doc["models"] = {n: doc["models"][n] for n in models}
    doc["targets"] = {target: doc["targets"][target]}
    return _masked(doc, Masker(_env_secrets(config, models)))  # type: ignore[no-any-return]
