"""LLM layer: typed operations with an `llm` and a `rules` backend, routed per role to a provider."""
