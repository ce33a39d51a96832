"""`offline`: routes every operation to its deterministic rules backend. No network, no key."""

from __future__ import annotations

from finhallu.llm.providers import register_provider


@register_provider("offline")
class OfflineProvider:
    name = "offline"
    offline = True
    key_envs: tuple[str, ...] = ()  # needs no key

    def run(self, op, cfg: dict, lang: str, inputs: dict):
        out = op.rules(**inputs)
        return out if isinstance(out, op.output) else op.output.model_validate(out)
