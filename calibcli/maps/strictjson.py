"""A JSON parser with limits, for every JSON file calib reads back (maps, map metadata, baselines).

`json.loads` accepts `NaN` and `Infinity`, turns `1e999999` into inf, keeps the last of
duplicate object keys and recurses once per nesting level (100 000 levels end in
RecursionError). Files written by calib never contain any of these, so a file that does is
corrupt or crafted; `loads` refuses it with one `StrictJSONError` whose text says why.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

# A JSON string literal (escapes included), to blank strings out before counting brackets.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
# bytes.translate tables (C speed): keep only brackets; number characters as themselves
# (digits as "d"), everything else as a space.
_NOT_BRACKET = bytes(c for c in range(256) if c not in b"[]{}")
_NUMBER_SHAPE = bytes(
    ord("d") if chr(c).isdigit() and c < 128 else ord("e") if c in b"eE" else c if c in b"+-." else ord(" ")
    for c in range(256)
)

class StrictJSONError(ValueError):
    """The text is not JSON, or breaks one of the limits; the message says which."""


@dataclass(frozen=True)
class Limits:
    """What `loads` accepts: total bytes, nesting depth, characters per number literal."""

    max_bytes: int = 1 << 30
    max_depth: int = 64
    max_number_chars: int = 64


def loads(data: bytes | str, limits: Limits = Limits()) -> Any:
    """Parse JSON text, refusing NaN/Infinity, overflowing or overlong numbers, duplicate keys,
    nesting deeper than `limits.max_depth` and texts longer than `limits.max_bytes`."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if len(raw) > limits.max_bytes:
        raise StrictJSONError(f"larger than {limits.max_bytes} bytes")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise StrictJSONError(f"not UTF-8 text (byte {exc.start})") from None
    blanked = _STRING.sub(b'""', raw)
    depth = nesting_depth(blanked)
    if depth > limits.max_depth:
        raise StrictJSONError(f"nested {depth} levels deep (at most {limits.max_depth})")
    _check_numbers(blanked, limits.max_number_chars)

    def parse_constant(name: str) -> Any:
        raise StrictJSONError(f"{name} is not a JSON number")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(items)
        if len(out) != len(items):
            seen: set[str] = set()
            dup = next(k for k, _ in items if k in seen or seen.add(k))  # type: ignore[func-returns-value]
            raise StrictJSONError(f"duplicate key {dup!r}")
        return out

    try:
        return json.loads(text, parse_constant=parse_constant, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        raise StrictJSONError(f"invalid JSON (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:  # only if max_depth is set above the interpreter's limit
        raise StrictJSONError("nested too deeply") from None


def nesting_depth(blanked: bytes) -> int:
    """Deepest bracket nesting of a JSON text whose string literals are blanked out."""
    brackets = np.frombuffer(blanked.translate(None, _NOT_BRACKET), dtype=np.uint8)
    step = np.where((brackets == ord("[")) | (brackets == ord("{")), 1, -1)
    return int(np.cumsum(step).max(initial=0))


def _check_numbers(blanked: bytes, max_chars: int) -> None:
    """Refuse number literals longer than `max_chars` or beyond float64 (substring scans).

    Python's parser reads the rest exactly: integers as int, the others as the nearest float.
    With at most `max_chars` digits, only a literal with a 3-digit positive exponent can
    overflow, so only those few are converted here.
    """
    shape = blanked.translate(_NUMBER_SHAPE)
    runs = shape.translate(bytes.maketrans(b"de+-.", b"11111"))
    at = runs.find(b"1" * (max_chars + 1))
    if at >= 0:
        literal = _literal(blanked, shape, at)
        raise StrictJSONError(f"number literal of {len(literal)} characters (at most {max_chars}): "
                              f"{literal[:20]}...")
    for pattern in (b"eddd", b"e+ddd"):
        at = shape.find(pattern)
        while at >= 0:
            literal = _literal(blanked, shape, at)
            try:
                value = float(literal)
            except ValueError:
                value = 0.0  # not a number: the parser reports it
            if not math.isfinite(value):
                raise StrictJSONError(f"number {literal} overflows a 64-bit float")
            at = shape.find(pattern, at + 1)


def _literal(blanked: bytes, shape: bytes, at: int) -> str:
    """The number literal around position `at`."""
    start = shape.rfind(b" ", 0, at) + 1
    end = shape.find(b" ", at)
    return blanked[start:end if end >= 0 else len(blanked)].decode("ascii", "replace")
