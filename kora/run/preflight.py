"""Checks before a run's first job: keys, services that cannot be reached, retired models.

Each would otherwise fail every call of the run one by one, after minutes of retries; the
Snakefile's `onstart` runs them for the models the jobs to run will call.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from kora.config.schema import ROLES, KoraConfig, chain
from kora.llm.service_config import ENV_REF

_PROXY_ENV = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def models_for_jobs(config: KoraConfig, jobs: Iterable[tuple[str, dict[str, str]]]) -> set[str]:
    """The models that jobs of these (rule, wildcards) will call."""
    names: set[str] = set()
    for rule, wc in jobs:
        if rule == "seeds":
            names |= set(chain(config.seed_model))
        elif rule == "scenarios":
            names |= {*chain(config.expand_model), *chain(config.user_model)}
        elif rule == "conversations":
            target = config.targets.get(wc.get("target", ""))
            names |= set(chain(config.user_model))
            if target is not None and target.model is not None:
                names.add(target.model)
        elif rule == "judgments":
            names |= set(config.judges)
    return names


def _custom_url(base_url: str | None, url_env: str | None) -> bool:
    url = base_url or os.environ.get(url_env or "") or ""
    return bool(url) and "api.openai.com" not in url


def missing_keys(config: KoraConfig, names: Iterable[str]) -> list[str]:
    """API-key variables these models need and the environment lacks."""
    missing = []
    for name in sorted(set(names)):
        m = config.models[name]
        kind = m.kind
        if m.api_key_env:
            env: str | None = m.api_key_env
        elif kind.local_servers and _custom_url(m.base_url, kind.url_env):
            env = None  # a local OpenAI-compatible server (vLLM, Ollama) may need no key
        else:
            env = kind.key_env
        needed = [env] if env else []
        if m.http is not None:  # `${NAME}` in a header: a secret the service needs
            for headers in (m.http.headers, *(r.headers for r in m.http.requests().values())):
                for value in headers.values():
                    needed += [n for n in ENV_REF.findall(value) if n not in needed]
        missing += [f"{e} (model {name!r})" for e in needed if not os.environ.get(e)]
    return missing


def unreachable(config: KoraConfig, names: Iterable[str]) -> list[str]:
    """Models among `names` whose own service (a configured or environment base URL)
    cannot be reached at all: a wrong URL, or a service that is not running."""
    from kora.llm.http import probe

    if any(os.environ.get(v) for v in _PROXY_ENV):
        return []  # the proxy knows the way; a direct probe would mislead
    out = []
    for name in sorted(set(names)):
        m = config.models[name]
        url = m.base_url or os.environ.get(m.kind.url_env or "", "")
        if not url and m.http is not None and "{" not in m.http.turn.url:
            url = m.http.turn.url  # an absolute URL without templates
        if m.kind.offline or not url:
            continue
        why = probe(url)
        if why is not None:
            out.append(
                f"model {name!r}: cannot connect to {url} ({why}): is the service "
                "running, and is base_url right?"
            )
    return out


def spared_by_fallback(config: KoraConfig, names: Iterable[str], bad: Iterable[str]) -> set[str]:
    """The `bad` models a run can do without: each is used only in fallback chains, and
    every chain it is in has a model among `names` that is not bad (its calls go there)."""
    names, bad = set(names), set(bad)
    single = set(config.judges) | {t.model for t in config.targets.values() if t.model}
    chains = [chain(getattr(config, role)) for role in ROLES]
    spared = set()
    for m in bad - single:
        mine = [c for c in chains if m in c]
        if mine and all(any(o in names and o not in bad for o in c) for c in mine):
            spared.add(m)
    return spared


def check_models(config: KoraConfig, names: Iterable[str]) -> tuple[list[str], list[str]]:
    """(errors that stop the run, warnings) for the models a run will call: missing keys
    and services that cannot be reached; a fallback chain's model with such a problem is
    only a warning while another model of its chain can take its calls."""
    names = set(names)
    keys = {n: missing_keys(config, [n]) for n in names}
    down = {n: unreachable(config, [n]) for n in names if not keys[n]}
    problems = {n: keys[n] or down.get(n, []) for n in names}
    spared = spared_by_fallback(config, names, [n for n, p in problems.items() if p])
    errors: list[str] = []
    missing = [k for n in sorted(names) if n not in spared for k in keys[n]]
    if missing:
        errors.append("set the API keys this run needs: " + ", ".join(missing))
    errors += [d for n in sorted(names) if n not in spared for d in down.get(n, [])]
    warnings = [
        f"{p} (the next model of its fallback chain takes its calls)"
        for n in sorted(spared)
        for p in problems[n]
    ]
    return errors, warnings
