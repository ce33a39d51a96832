"""Find model files locally: a folder path, an env override, or the local Hugging Face cache.

Nothing here downloads: the hub is consulted with HF_HUB_OFFLINE=1 through
`huggingface_hub.try_to_load_from_cache`, falling back to a scan of the cache's snapshot
folders. A missing model raises ModelNotAvailableError naming the model, where it was looked
for, and how to provide it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


class ModelNotAvailableError(FileNotFoundError):
    """A model or tokenizer that must be loaded from local files is not there (nothing is downloaded)."""


KURE_REPO = "nlpai-lab/KURE-v1"
KURE_ENV = "FINHALLU_KURE_PATH"  # a local folder holding KURE-v1 (config, weights, tokenizer.json)


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def hf_cache_dir() -> Path:
    _offline()
    try:
        from huggingface_hub import constants

        return Path(constants.HF_HUB_CACHE)
    except Exception:  # pragma: no cover - huggingface_hub is a dependency of sentence-transformers
        return Path(os.environ.get("HF_HUB_CACHE", Path.home() / ".cache" / "huggingface" / "hub"))


def _from_hf_cache(repo_id: str, filename: str) -> Path | None:
    _offline()
    try:
        from huggingface_hub import try_to_load_from_cache

        hit = try_to_load_from_cache(repo_id, filename)
        if isinstance(hit, str) and Path(hit).is_file():
            return Path(hit).parent
    except Exception:
        pass
    # Fallback: a snapshot without refs/main (e.g. copied by hand): newest snapshot holding the file.
    snaps = hf_cache_dir() / f"models--{repo_id.replace('/', '--')}" / "snapshots"
    if snaps.is_dir():
        found = sorted((p for p in snaps.iterdir() if (p / filename).is_file()), key=lambda p: p.stat().st_mtime)
        if found:
            return found[-1]
    return None


def folder_fingerprint(folder: Path) -> str:
    """A cheap identity of a model folder: file names and sizes, plus the content of small config files."""
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if not p.is_file() or any(part.startswith(".") for part in p.relative_to(folder).parts):
            continue
        rel = p.relative_to(folder).as_posix()
        size = p.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        if p.suffix in (".json", ".txt", ".model") and size < 4_000_000:
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()[:12]


def missing_message(what: str, spec: str, filename: str, env_var: str | None) -> str:
    env = f", set ${env_var} to a local folder" if env_var else ""
    return (
        f"{what} {spec!r} is not available locally: it is not a folder holding {filename}{env} and the Hugging Face "
        f"cache ({hf_cache_dir()}) has no snapshot of it. finhallu never downloads models. Provide it by running "
        f"`hf download {spec}` (or `huggingface-cli download {spec}`) on a machine with network access and copying "
        f"that cache here (or pointing HF_HUB_CACHE at it), or by giving a local folder path instead of the model id"
        f"{env.replace(', set', ' / setting')}."
    )


def resolve_model_dir(
    spec: str, filename: str = "config.json", env_var: str | None = None, what: str = "model"
) -> tuple[Path, str]:
    """(folder, revision tag) of a model given by local path or hub id; never downloads.

    The revision tag is the hub commit (12 hex) for a cached snapshot, `fp-<hash>` of the folder
    for a local path, so a model id built from it changes when the weights do.
    """
    if env_var and os.environ.get(env_var):
        folder = Path(os.environ[env_var]).expanduser()
        if not (folder / filename).is_file():
            raise ModelNotAvailableError(f"${env_var}={folder} does not hold {filename} for {what} {spec!r}")
        return folder.resolve(), "fp-" + folder_fingerprint(folder)
    p = Path(spec).expanduser()
    if p.is_file() and p.name == filename:
        p = p.parent
    if p.is_dir():
        if not (p / filename).is_file():
            raise ModelNotAvailableError(f"{what} folder {p} has no {filename}")
        return p.resolve(), "fp-" + folder_fingerprint(p)
    if spec.startswith(("/", ".", "~")) or spec.count("/") != 1:
        raise ModelNotAvailableError(f"{what} {spec!r}: no such local folder, and it is not a hub id (org/name)")
    snapshot = _from_hf_cache(spec, filename)
    if snapshot is None:
        raise ModelNotAvailableError(missing_message(what, spec, filename, env_var))
    return snapshot, snapshot.name[:12] if len(snapshot.name) >= 12 else "fp-" + folder_fingerprint(snapshot)


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
