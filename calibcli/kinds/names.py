"""The names K-class scores are read by, light enough for the door (no numpy, no pyarrow):
class names (`--classes`, `classes=`, a map's, a file's columns' suffixes) and score kinds.

A class name, like a label, is compared by its text (`canonical_text`: 2, 2.0 and "2" are one
name; true/false in any case are one; see `kinds.labels`). Class names are never empty and
never twice the same text.
"""

from __future__ import annotations

import math
import numbers
import re
from typing import Any, Sequence

from calibcli.errors import UsageError, shown

SCORE_KINDS = ("probability", "logit")
KIND_OPTIONS = ("auto", *SCORE_KINDS)
WHOLE = r"^[+-]?\d+(\.0*)?$"  # text of a whole number


def canonical_text(value: Any) -> str:
    """One value's canonical text: text trimmed, a whole number without a fraction, booleans and
    the words true/false as "true"/"false", other numbers as Python writes them."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        v = float(value)
        return str(int(v)) if math.isfinite(v) and v == int(v) and abs(v) < 2 ** 53 else repr(v)
    text = str(value).strip()
    if text.lower() in ("true", "false"):
        return text.lower()
    if re.match(WHOLE, text) and abs(float(text)) < 2 ** 53:
        return str(int(float(text)))
    return text


def check_classes(names: Sequence[Any], option: str = "--classes", error: type = UsageError,
                  hint: str = "name each class once, e.g. --classes a,b,c") -> tuple:
    """Class names: none empty, none twice as text, refused with one message whichever door
    they came by (`option` names the door, `error` and `hint` what a refusal is)."""
    given = ",".join(str(n) for n in names)
    seen: dict[str, Any] = {}
    for name in names:
        text = canonical_text(name)
        if not text:
            raise error(f"{option} {shown(given)}: an empty class name", hint=hint)
        if text in seen:
            same = "" if str(seen[text]) == str(name) else f" (as {shown(str(seen[text]))})"
            raise error(f"{option} {shown(given)}: class name {shown(str(name))} appears twice{same}", hint=hint)
        seen[text] = name
    return tuple(names)


def parse_classes(text: str | None) -> tuple[str, ...] | None:
    """`--classes a,b,c` as names (None when not given), checked by `check_classes`."""
    if text is None:
        return None
    return check_classes(tuple(part.strip() for part in text.split(",")))


def check_kind_option(kind: str) -> str:
    """`--score-kind` / `score_kind=`: auto, probability or logit."""
    if kind not in KIND_OPTIONS:
        raise UsageError(f"--score-kind {kind!r}: expected one of {', '.join(KIND_OPTIONS)}")
    return kind


__all__ = ["KIND_OPTIONS", "SCORE_KINDS", "WHOLE", "canonical_text", "check_classes", "check_kind_option",
           "parse_classes"]
