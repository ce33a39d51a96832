"""Text encoding of a raw source file, decided from its bytes before any structure is parsed.

Byte-order marks first (UTF-32 before UTF-16: the UTF-32-LE mark starts with the UTF-16-LE one),
then BOM-less UTF-16 recognised by its NUL bytes, then the source's own candidates in order.
"""

from __future__ import annotations

import codecs

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _bomless_utf16(data: bytes) -> str | None:
    """ASCII-heavy text in UTF-16 without a mark has NULs in every other byte."""
    head = data[:4096]
    if len(head) < 8 or head.count(0) < len(head) // 4:
        return None
    even, odd = head[0::2].count(0), head[1::2].count(0)
    if odd > 3 * max(even, 1):
        return "utf-16-le"
    if even > 3 * max(odd, 1):
        return "utf-16-be"
    return None


def decode_bytes(data: bytes, candidates: tuple[str, ...] = ("utf-8",)) -> tuple[str, str]:
    """(text, encoding). Raises UnicodeDecodeError when no candidate decodes the bytes strictly."""
    for bom, enc in _BOMS:
        if data.startswith(bom):
            return data.decode(enc), enc
    guessed = _bomless_utf16(data)
    for enc in ((guessed,) if guessed else ()) + candidates:
        try:
            return data.decode(enc), enc
        except UnicodeDecodeError:
            continue
    raise UnicodeDecodeError(candidates[-1], data[:1], 0, 1, f"not {' / '.join(candidates)}")
