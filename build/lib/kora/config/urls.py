"""The URLs of a config (a model's `base_url`, an http service's absolute request URLs):
what is wrong with one, said without repeating a password it holds.

A URL must carry no credentials (`https://user:password@host`): a service's base URL is
part of its results (results.json, the report), of the rules' params (Snakemake's
metadata in .snakemake/) and of the job logs, so a password in it would be written
everywhere. Credentials go in a header read from an environment variable, which is never
written.
"""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

from kora.llm.registry import ProviderKind


def url_problem(url: str, kind: ProviderKind, *, template: bool = False) -> str | None:
    """Why `url` cannot be used (None: it can); `template`: an http request's URL, whose
    host may come from a template."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises for a port that is not a number)
    except ValueError as exc:
        return f"not a valid URL ({exc})"
    if parts.username is not None or parts.password is not None:
        return credentials_problem(parts, kind)
    if template:
        return None
    if parts.scheme not in ("http", "https"):
        return f"not an http(s) URL: {url!r}"
    if not parts.hostname:
        return f"no host in the URL: {url!r}"
    return None


def credentials_problem(parts: SplitResult, kind: ProviderKind) -> str:
    host = parts.netloc.rpartition("@")[2]
    shown = parts._replace(netloc=f"****@{host}").geturl()
    if kind.described:  # its requests, headers included, are in the config
        how = (
            'for basic auth, under `http:` put `headers: {Authorization: "Basic '
            '${MY_SERVICE_AUTH}"}` and export MY_SERVICE_AUTH=$(printf %s user:password | '
            "base64); a token goes the same way (`Bearer ${MY_SERVICE_TOKEN}`)"
        )
    else:
        how = (
            "export the token in a variable and name it with `api_key_env: MY_SERVICE_TOKEN` "
            "(sent as `Authorization: Bearer ...`)"
        )
    return (
        f"credentials in the URL ({shown}) would be written to results.json, the report, "
        f"the job logs and Snakemake's metadata; pass them as a header read from an "
        f"environment variable instead: {how}"
    )
