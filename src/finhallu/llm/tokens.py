"""Token counts without a tokenizer, for estimates made before any call (a dry run).

GPT-4o's o200k and Gemini's tokenizers both come to about four UTF-8 bytes per token on prose:
an English token is ~4 characters of 1 byte, a Korean token ~1.3-1.5 syllables of 3 bytes. Real
counts vary with the text (tables of figures are denser); providers' usage fields are the truth
and the ledger records those. The loopback test server counts usage the same way, so the dry
run's test measures the accounting (which prompts, how long, how many calls), not a tokenizer.
"""

from __future__ import annotations

BYTES_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4  # role and separators per chat message


def approx_tokens(text: str) -> int:
    return -(-len((text or "").encode("utf-8")) // BYTES_PER_TOKEN)


def approx_prompt_tokens(messages) -> int:
    """Prompt tokens of (role, content) messages."""
    return sum(approx_tokens(content) + MESSAGE_OVERHEAD for _, content in messages)
