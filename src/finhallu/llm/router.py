"""Route an operation call for a role to its provider (config `roles.<role>`)."""

from __future__ import annotations

from finhallu.llm.operations import OPERATIONS
from finhallu.llm.providers import get_provider


class LLMRouter:
    def __init__(self, roles: dict[str, dict]):
        self.roles = roles

    def role_config(self, role: str) -> dict:
        return self.roles.get(role) or {"provider": "offline", "model": "rules", "temperature": 0.0}

    def backend(self, role: str) -> str:
        cfg = self.role_config(role)
        return f"{cfg['provider']}:{cfg['model']}"

    def call(self, role: str, op_name: str, **inputs):
        """Run operation `op_name` for `role`; inputs are the operation's keyword arguments (incl. `lang`)."""
        op = OPERATIONS[op_name]
        cfg = self.role_config(role)
        provider = get_provider(cfg["provider"])
        return provider.run(op, cfg, inputs.get("lang", "ko"), inputs)
