"""API keys: from the environment or a Prefect Secret block, never into a table, log or artifact.

`check_keys` runs before any stage: a profile that needs a key nobody provided fails at once,
naming the role, instead of after an hour of offline stages.
"""

from __future__ import annotations

import os

from finhallu.llm.errors import MissingKeyError

DEFAULT_KEY_ENVS = {
    "openai": ("OPENAI_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "openai_compatible": ("OPENAI_API_KEY",),
}
KEYLESS = {"offline"}
# vLLM and Ollama accept any key unless started with one; the SDK insists on a non-empty string.
PLACEHOLDER_KEY = "not-needed"


def _secret(name: str) -> str | None:
    try:
        from prefect.blocks.system import Secret

        return Secret.load(name).get()
    except Exception:  # no such block, no API reachable: treated as missing, reported by the caller
        return None


def resolve_key(role: str, cfg: dict) -> str | None:
    provider = cfg["provider"]
    if provider in KEYLESS:
        return None
    envs = (cfg["api_key_env"],) if cfg.get("api_key_env") else DEFAULT_KEY_ENVS[provider]
    for env in envs:
        if os.environ.get(env):
            return os.environ[env]
    if cfg.get("api_key_secret"):
        value = _secret(cfg["api_key_secret"])
        if value:
            return value
    if provider == "openai_compatible":
        return PLACEHOLDER_KEY
    where = " or ".join(envs)
    if cfg.get("api_key_secret"):
        where += f" or the Prefect Secret block {cfg['api_key_secret']!r}"
    raise MissingKeyError(
        f"role {role!r} uses {provider}:{cfg['model']} but no API key was found: set {where}"
        + ("" if cfg.get("api_key_secret") else " (or name a Prefect Secret block in roles."
           f"{role}.api_key_secret)"))


def check_keys(roles: dict[str, dict]) -> None:
    """Raise one MissingKeyError naming every role that lacks a key."""
    problems = []
    for role, cfg in sorted(roles.items()):
        try:
            resolve_key(role, cfg)
        except MissingKeyError as exc:
            problems.append(str(exc))
    if problems:
        raise MissingKeyError("; ".join(problems))


def mask(text: str, *keys: str | None) -> str:
    for k in keys:
        if k and k != PLACEHOLDER_KEY and len(k) >= 4:
            text = text.replace(k, "***")
    return text
