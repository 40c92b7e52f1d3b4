"""The config a result's manifest and bundle carry: every setting the result used, and no
credential in any form a config can hold one (a literal header, a URL's password or
token, a copy of a key the run reads from the environment)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from kora.config.public import public_config
from kora.config.schema import KoraConfig
from kora.llm.masking import Masker

SECRETS = ("sk-env-key-0123456789", "literal-header-token-abc", "hunter2pass", "tok-in-query-xyz")


def _config(**extra_models: Any) -> KoraConfig:
    return KoraConfig.model_validate(
        {
            "models": {
                "judge": {"provider": "anthropic", "model": "claude-x", "temperature": 0.2},
                "child": {
                    "provider": "openai",
                    "model": "gpt-x",
                    "base_url": "https://user:hunter2pass@llm.example/v1?api_key=tok-in-query-xyz",
                    "api_key_env": "MY_KEY",
                },
                "app": {
                    "provider": "http",
                    "http": {
                        "headers": {
                            "Authorization": "Bearer literal-header-token-abc",
                            "X-Api-Key": "${APP_KEY}",
                            "Accept": "application/json",
                        },
                        "turn": {
                            "url": "https://app.example/chat",
                            "reply": "text",
                            "body": {"message": "{{ message }}"},
                        },
                    },
                },
                "unused": {"provider": "anthropic", "model": "claude-other"},
                **extra_models,
            },
            "seed_model": "judge",
            "expand_model": "judge",
            "user_model": "child",
            "judges": ["judge"],
            "targets": {"app-target": {"model": "app"}, "other": {"model": "unused"}},
        }
    )


@pytest.mark.timeout(30)
def test_no_credential_survives_and_every_setting_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", SECRETS[0])
    monkeypatch.setenv("APP_KEY", SECRETS[1])  # the same value as the literal header
    doc = public_config(_config(), "app-target")
    text = orjson.dumps(doc).decode()
    masker = Masker(SECRETS)
    assert not masker.masked(text)[1], text
    # this result's target and the models it rests on, not the others
    assert set(doc["targets"]) == {"app-target"}
    assert set(doc["models"]) == {"app", "judge", "child"}
    assert doc["models"]["judge"]["temperature"] == 0.2
    headers = doc["models"]["app"]["http"]["headers"]
    # a header that only names a variable holds no secret; a plain one is kept
    assert headers == {
        "Authorization": "****",
        "X-Api-Key": "${APP_KEY}",
        "Accept": "application/json",
    }
    assert doc["models"]["child"]["base_url"] == "https://****@llm.example/v1?api_key=%2A%2A%2A%2A"
    assert doc["models"]["child"]["api_key_env"] == "MY_KEY"  # a name, not a key


@pytest.mark.timeout(30)
def test_a_key_copied_into_any_setting_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-copied-9876543210")
    cfg = _config(judge={"provider": "anthropic", "model": "sk-ant-copied-9876543210"})
    text = orjson.dumps(public_config(cfg, "app-target")).decode()
    assert "sk-ant-copied" not in text and "****" in text
