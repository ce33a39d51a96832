"""The base of every config section: unknown keys are errors, not silently ignored settings."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")
