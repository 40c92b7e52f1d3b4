"""Checks before a run's first job: keys, services that cannot be reached, retired models.

Each would otherwise fail every call of the run one by one, after minutes of retries; the
Snakefile's `onstart` runs them for the models the jobs to run will call.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterable

from kora.config.schema import ROLES, KoraConfig, chain
from kora.llm.settings.service_config import ENV_REF
from kora.llm.wire.http import address, cannot_connect

_PROXY_ENV = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def models_for_jobs(config: KoraConfig, jobs: Iterable[tuple[str, dict[str, str]]]) -> set[str]:
    """The models that jobs of these (rule, wildcards) will call: their stages' roles."""
    from kora.run.stages.registry import STAGES

    return {
        m
        for rule, wc in jobs
        if rule in STAGES
        for m in STAGES[rule].models(config, wc.get("target"))
    }


def missing_keys(config: KoraConfig, names: Iterable[str]) -> list[str]:
    """API-key variables these models need and the environment lacks."""
    missing = []
    for name in sorted(set(names)):
        m = config.models[name]
        env, key_needed = m.api_key()
        needed = [env] if env and key_needed else []
        if m.http is not None:  # `${NAME}` in a header: a secret the service needs
            for headers in (m.http.headers, *(r.headers for r in m.http.requests().values())):
                for value in headers.values():
                    needed += [n for n in ENV_REF.findall(value) if n not in needed]
        missing += [f"{e} (model {name!r})" for e in needed if not os.environ.get(e)]
    return missing


PROBE_TIMEOUT = 5.0  # seconds a connection may take before the host counts as slow


def _connect_all(addresses: set[tuple[str, int]]) -> dict[tuple[str, int], OSError | None]:
    """Each address tried once, all at the same time: what each attempt met (None: a
    connection). The run waits for the slowest one alone, and a name lookup that hangs
    past PROBE_TIMEOUT counts as slow (a TimeoutError)."""
    seen: dict[tuple[str, int], OSError | None] = {}

    def attempt(address: tuple[str, int]) -> None:
        try:
            socket.create_connection(address, timeout=PROBE_TIMEOUT).close()
            seen[address] = None
        except OSError as exc:  # TimeoutError is one
            seen[address] = exc

    # daemon threads: a lookup the OS never answers must not keep the run from ending
    threads = [threading.Thread(target=attempt, args=(a,), daemon=True) for a in addresses]
    for t in threads:
        t.start()
    deadline = time.monotonic() + PROBE_TIMEOUT + 1.0
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return {a: seen.get(a, TimeoutError()) for a in addresses}


def reachability(config: KoraConfig, names: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """({model: why it stops the run}, warnings) for the models among `names` whose
    address cannot be reached: a host that does not resolve or a port that refuses
    (a wrong URL, a service not running, a machine with no network) stops the run, the
    public APIs included; a host too slow to connect may be a passing fault, left to the
    run's retries with a warning."""
    if any(os.environ.get(v) for v in _PROXY_ENV):
        return {}, []  # the proxy knows the way; a direct attempt would mislead
    where = {}
    for name in sorted(set(names)):
        found = config.models[name].endpoint()
        at = address(found[0]) if found else None
        if found and at:
            where[name] = (found[0], found[1], at)
    seen = _connect_all({a for _, _, a in where.values()})
    errors: dict[str, str] = {}
    warnings: list[str] = []
    for name, (url, source, (host, port)) in where.items():
        got = seen[(host, port)]
        if isinstance(got, TimeoutError):
            warnings.append(
                f"model {name!r}: {host}:{port} did not answer within {PROBE_TIMEOUT:g} s; "
                "the run starts, and its calls retry as for any slow service"
            )
        elif got is not None:
            errors[name] = cannot_connect(f"model {name!r}", url, got, source)
    return errors, warnings


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
    down, slow = reachability(config, [n for n in names if not keys[n]])
    problems = {n: keys[n] or ([down[n]] if n in down else []) for n in names}
    spared = spared_by_fallback(config, names, [n for n, p in problems.items() if p])
    errors: list[str] = []
    missing = [k for n in sorted(names) if n not in spared for k in keys[n]]
    if missing:
        errors.append("set the API keys this run needs: " + ", ".join(missing))
    errors += [down[n] for n in sorted(down) if n not in spared]
    warnings = [
        f"{p} (the next model of its fallback chain takes its calls)"
        for n in sorted(spared)
        for p in problems[n]
    ]
    return errors, warnings + slow
