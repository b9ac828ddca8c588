"""Reading and writing files: one module per topic.

- `reading`: formats (extension, then sniffing), gzip, stdin, whole tables or record batches;
- `paths`: what a path names (stdin, file, URI, directory or glob of Parquet parts);
- `columns`: scores, labels, weights and fields as checked arrays, errors naming the row;
- `targets`: where outputs go (same-file refusal, special targets, atomic files, formats,
  clean-up on signals); it imports no pyarrow, so the CLI can arm it at start-up;
- `writing`: the batch writers (CSV, TSV, JSON lines, Parquet, gzip).

The names below are the package's interface (`io.read_table(...)`), loaded on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_HOME = {
    "check_scores_for": "columns", "field_codes": "columns", "field_values": "columns",
    "labels_from": "columns", "map_features": "columns", "missing_column": "columns", "refused_scores": "columns", "scores_from": "columns",
    "scores_or_nan": "columns",
    "weights_from": "columns",
    "display_name": "paths", "is_parts": "paths", "is_uri": "paths", "list_parts": "paths",
    "open_dataset": "paths", "skipped_part": "paths",
    "FORMATS": "reading", "check_format": "reading", "format_from_path": "reading",
    "iter_batches": "reading", "open_source": "reading", "parquet_rows": "reading",
    "read_bytes": "reading", "read_table": "reading",
}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(import_module(f"calibcli.io.{_HOME[name]}"), name)
    raise AttributeError(f"module 'calibcli.io' has no attribute {name!r}")
