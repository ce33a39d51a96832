"""Typed rows generated from the table contracts: one TypedDict per table (`schemas/rows.py`).

Stage code that builds or reads rows annotates them with these types, so the type checker holds
every row literal to its table's contract (a misspelt or missing column, a number where a string
belongs) before a build runs the gate. The file is generated, never edited:

    python -m finhallu.schemas.rowgen --write

and a test fails when it no longer matches the contracts.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import polars as pl

from finhallu.schemas.contracts import BLOCKS, CONTEXT, CONTRACTS, MESSAGES, SAMPLE_PASSAGES, Contract

# The contracts' shared struct types, by name; any other struct is named after its column. A struct's
# fields are present in every row that has the struct, so typed as such, but for these (a 10-K block
# has a section role, an AI-Hub paragraph none).
NULLABLE_FIELDS = {"Block": {"role"}}
NAMED_STRUCTS = {
    repr(CONTEXT.inner): "ContextEntry",
    repr(MESSAGES.inner): "Message",
    repr(SAMPLE_PASSAGES.inner): "SamplePassage",
    repr(BLOCKS.inner): "Block",
}

HEADER = '''"""Typed rows of every published table, generated from schemas/contracts.py by
`python -m finhallu.schemas.rowgen --write`: do not edit by hand.

A column outside the contract's key and not-null columns may be None."""

from __future__ import annotations

from typing import TypedDict
'''


def camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


class _Structs:
    """Struct dtypes seen so far, each named once after the column that first holds it."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}  # repr(dtype) -> class name
        self.defs: list[str] = []

    def name_of(self, dtype: pl.Struct, column: str, table: str) -> str:
        key = repr(dtype)
        if key not in self.names:
            name = NAMED_STRUCTS.get(key) or camel(column) + "Item"
            if name in self.names.values():
                name = camel(table) + name
            nullable = NULLABLE_FIELDS.get(name, set())
            fields = "".join(
                f"    {f.name}: {self.annotation(f.dtype, f.name, table)}{' | None' if f.name in nullable else ''}\n"
                for f in dtype.fields
            )
            self.defs.append(f"\n\nclass {name}(TypedDict):\n{fields}")
            self.names[key] = name
        return self.names[key]

    def annotation(self, dtype: Any, column: str, table: str) -> str:  # a polars dtype (class or instance)
        if isinstance(dtype, pl.List):
            return f"list[{self.annotation(dtype.inner, column, table)}]"
        if isinstance(dtype, pl.Struct):
            return self.name_of(dtype, column, table)
        if dtype.is_integer():
            return "int"
        if dtype.is_float():
            return "float"
        if dtype == pl.Boolean:
            return "bool"
        if dtype == pl.String:
            return "str"
        raise TypeError(f"no row annotation for {dtype!r} ({table}.{column})")


def row_class(contract: Contract, structs: _Structs) -> str:
    required = set(contract.key) | set(contract.not_null)
    lines = []
    for column, dtype in contract.columns.items():
        ann = structs.annotation(dtype, column, contract.name)
        lines.append(f"    {column}: {ann}" + ("" if column in required else " | None"))
    doc = f'    """A row of `{contract.name}`."""\n\n'
    return f"\n\nclass {camel(contract.name)}Row(TypedDict):\n{doc}" + "\n".join(lines) + "\n"


def render() -> str:
    structs = _Structs()
    tables = [row_class(CONTRACTS[name], structs) for name in sorted(CONTRACTS)]
    return HEADER + "".join(structs.defs) + "".join(tables)


def rows_path() -> Path:
    return Path(__file__).with_name("rows.py")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write schemas/rows.py (default: print it)")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        rows_path().write_text(text, encoding="utf-8")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
