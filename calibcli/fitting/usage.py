"""How a fit used each `--field-col` and `--feature-col` column, in words (the fit summary on
stderr): from the training block (which columns were fields, which features were read as
categorical or numeric) and the calibrator's `summary()` (levels, shifts, tree splits).

    field 'publisher': 37 levels, 12 with their own shift (|shift| >= 0.1 log-odds, largest 0.84), 3 tree splits
    feature 'country' (categorical): 8 values, 2 with their own shift (largest 0.31), used in 5 tree splits
    feature 'age' (numeric): coefficient 0.012 per unit, 16 bands, used in 0 tree splits
"""

from __future__ import annotations

from typing import Any, Mapping


def _levels(name: str, kind: str, col: Mapping[str, Any]) -> str:
    levels = col.get("levels")
    head = f"field {name!r}: {levels} levels" if kind == "field" else \
        f"feature {name!r} (categorical): {levels} values"
    if "shifted_levels" in col:
        head += (f", {col['shifted_levels']} with their own shift (|shift| >= 0.1 log-odds, "
                 f"largest {col['largest_shift']:.3g})")
    if "tree_splits" in col:
        head += f", used in {col['tree_splits']} tree splits"
    return head


def _numeric(name: str, col: Mapping[str, Any]) -> str:
    text = f"feature {name!r} (numeric)"
    parts = []
    if "coefficient" in col:
        parts.append(f"coefficient {col['coefficient']:.3g} per unit")
    if "bands" in col:
        parts.append(f"{col['bands']} bands with shrunk shifts")
    if "tree_splits" in col:
        parts.append(f"used in {col['tree_splits']} tree splits")
    return text + (": " + ", ".join(parts) if parts else ": a standardised input of the model")


def column_usage(training: Mapping[str, Any]) -> list[str]:
    """One line per field and feature column of a fit, in the order given on the command line."""
    fields = list(training.get("field_cols", []))
    features: Mapping[str, str] = training.get("feature_cols", {})
    if not fields and not features:
        return []
    fit = training.get("fit", {})
    columns: Mapping[str, Any] = fit.get("columns", {})
    levels = fit.get("levels", {})
    how = fit.get("column_use")  # a method's own sentence for how categorical columns enter it
    lines = []
    for name in fields:
        col = dict(columns.get(name, {}), **({"levels": levels[name]} if name in levels else {}))
        lines.append(_levels(name, "field", col) + (f" ({how})" if how else ""))
    for name, kind in features.items():
        if kind == "categorical":
            col = dict(columns.get(name, {}), **({"levels": levels[name]} if name in levels else {}))
            lines.append(_levels(name, "feature", col) + (f" ({how}, like a field)" if how else ""))
        else:
            lines.append(_numeric(name, columns.get(name, {})))
    return lines


__all__ = ["column_usage"]
