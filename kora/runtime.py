"""What a stage job needs at hand: validated config, taxonomy, model clients, usage."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kora.config import KoraConfig, validate_config
from kora.llm.cache import CallCache
from kora.llm.client import ModelClient
from kora.llm.targets import EndpointTarget, LLMTarget, Target
from kora.llm.usage import Usage
from kora.taxonomy import Taxonomy, load_taxonomy
from kora.templates import set_prompts_dir


@dataclass
class Runtime:
    config: KoraConfig
    taxonomy: Taxonomy
    workdir: Path = Path(".")
    usage: Usage = field(default_factory=Usage)
    _clients: dict[str, ModelClient] = field(default_factory=dict)
    _targets: dict[str, Target] = field(default_factory=dict)

    @classmethod
    def from_raw(cls, raw: dict[str, Any], workdir: Path | str = ".") -> Runtime:
        workdir = Path(workdir)
        taxonomy = load_taxonomy(workdir / raw.get("taxonomy_dir", "data/taxonomy"))
        config = validate_config(raw, taxonomy)
        if config.prompts_dir is not None:
            set_prompts_dir(workdir / config.prompts_dir)
        return cls(config, taxonomy, workdir)

    @property
    def cache(self) -> CallCache:
        return CallCache(self.workdir / self.config.cache_dir)

    @property
    def state_dir(self) -> Path:
        return self.workdir / ".kora" / "limits"

    def client(self, name: str) -> ModelClient:
        if name not in self._clients:
            self._clients[name] = ModelClient(
                name,
                self.config.models[name],
                cache=self.cache,
                usage=self.usage,
                state_dir=self.state_dir,
            )
        return self._clients[name]

    def target(self, target_name: str) -> Target:
        model_name = self.config.targets[target_name].model
        if model_name is None:
            raise ValueError(f"target {target_name!r} has imported conversations: no model to call")
        if model_name not in self._targets:
            mc = self.config.models[model_name]
            if mc.provider == "chat-endpoint":
                from kora.llm.chat_endpoint import ChatEndpointTarget
                from kora.llm.limits import limiter_for

                endpoint = ChatEndpointTarget(
                    model_name, mc, limiter=limiter_for(model_name, mc, self.state_dir)
                )
                self._targets[model_name] = EndpointTarget(endpoint, model_name, self.usage)
            else:
                self._targets[model_name] = LLMTarget(self.client(model_name))
        return self._targets[model_name]

    async def aclose(self) -> None:
        for t in self._targets.values():
            await t.aclose()
        for c in self._clients.values():
            await c.aclose()
