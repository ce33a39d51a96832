"""API keys: from the environment or a Prefect Secret block, never into a table, log or artifact.

`check_keys` runs before any stage: a profile that needs a key nobody provided fails at once,
naming the role, instead of after an hour of offline stages.
"""

from __future__ import annotations

import os

from finhallu.llm.errors import MissingKeyError
from finhallu.llm.providers import get_provider

# vLLM and Ollama accept any key unless started with one; the SDK insists on a non-empty string.
PLACEHOLDER_KEY = "not-needed"


def _secret(name: str) -> str | None:
    try:
        from prefect.blocks.system import Secret

        return Secret.load(name).get()  # type: ignore[union-attr]  # sync_compatible: outside an event loop it is the block
    except Exception:  # no such block, no API reachable: treated as missing, reported by the caller
        return None


def key_problem(value: str) -> str | None:
    """What is wrong with the shape of a key (already stripped), never quoting it."""
    if not value:
        return "is empty"
    if any(ch.isspace() for ch in value):
        return "contains whitespace inside it (two keys pasted together, or a line break?)"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        return "contains control characters"
    if not value.isascii():
        return "contains non-ASCII characters (HTTP headers cannot carry them)"
    return None


def _checked(role: str, where: str, value: str) -> str:
    # A trailing newline (`echo $KEY > file`, a copied line) is the usual accident: an HTTP client
    # refuses it in a header, every attempt fails as a "connection error" and the build stalls.
    value = value.strip()
    problem = key_problem(value)
    if problem:
        raise MissingKeyError(f"role {role!r}: the API key in {where} {problem}; set it to the bare key")
    return value


def resolve_key_source(role: str, cfg: dict) -> tuple[str | None, str | None]:
    """(key, where it came from: the env var or Secret block) for a role; whitespace around the
    key is stripped and its shape checked (MissingKeyError naming the variable, never the key)."""
    provider = cfg["provider"]
    plugin = get_provider(provider)
    if getattr(plugin, "offline", False):
        return None, None
    envs = (cfg["api_key_env"],) if cfg.get("api_key_env") else plugin.key_envs
    for env in envs:
        if os.environ.get(env, "").strip():
            return _checked(role, env, os.environ[env]), env
    if cfg.get("api_key_secret"):
        value = _secret(cfg["api_key_secret"])
        if value and value.strip():
            where = f"the Prefect Secret block {cfg['api_key_secret']!r}"
            return _checked(role, where, value), where
    if getattr(plugin, "key_optional", False):
        return PLACEHOLDER_KEY, None
    where = " or ".join(envs)
    if cfg.get("api_key_secret"):
        where += f" or the Prefect Secret block {cfg['api_key_secret']!r}"
    raise MissingKeyError(
        f"role {role!r} uses {provider}:{cfg['model']} but no API key was found: set {where}"
        + ("" if cfg.get("api_key_secret") else f" (or name a Prefect Secret block in roles.{role}.api_key_secret)")
    )


def resolve_key(role: str, cfg: dict) -> str | None:
    return resolve_key_source(role, cfg)[0]


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
