"""JSON schemas for structured output.

OpenAI's strict mode requires every property listed in `required`, `additionalProperties:
false` on every object and no `default`; Gemini accepts the same schema as
`response_json_schema`. Optional fields stay optional through `anyOf [..., null]`.
"""

from __future__ import annotations

import copy
from functools import lru_cache

from pydantic import BaseModel


def _strict(node):
    if isinstance(node, dict):
        node.pop("default", None)
        node.pop("title", None)
        if node.get("type") == "object" or "properties" in node:
            props = node.get("properties", {})
            node["additionalProperties"] = False
            node["required"] = list(props)
        for v in node.values():
            _strict(v)
    elif isinstance(node, list):
        for v in node:
            _strict(v)
    return node


@lru_cache(maxsize=None)
def _cached(model: type[BaseModel]) -> dict:
    return _strict(copy.deepcopy(model.model_json_schema()))


def strict_json_schema(model: type[BaseModel]) -> dict:
    return copy.deepcopy(_cached(model))
