"""Reading and writing files: one module per topic.

- `sources`: opening an input (file, stdin, FIFO, URI), its format (extension, then
  sniffing) and gzip;
- `reading`: whole tables in memory (long rows read again with larger blocks, prefetching);
- `batches`: streaming record batches;
- `parquet`: Parquet files and datasets of parts (batches, whole datasets, row counts);
- `parsers`: pyarrow's CSV/TSV/JSON lines readers as calib configures them;
- `readerrors`: read errors as one line naming the file, column and true row;
- `paths`: what a path names (stdin, file, URI, directory or glob of Parquet parts);
- `columns`: scores, labels, weights and fields as checked arrays, errors naming the row;
- `score_cols`: the K score columns of `--score-cols`, class names and label codes;
- `targets`: where outputs go (same-file refusal, special targets, atomic files, formats,
  clean-up on signals); it imports no pyarrow, so the CLI can arm it at start-up;
- `writing`: the batch writers (CSV, TSV, JSON lines, Parquet, gzip).

The names below are the package's interface (`io.read_table(...)`), loaded on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_HOME = {
    "categorical_features": "columns", "check_scores_for": "columns", "field_codes": "columns", "field_values": "columns",
    "map_features": "columns", "missing_column": "columns", "refused_scores": "columns", "scores_from": "columns",
    "scores_or_nan": "columns",
    "weights_from": "columns",
    "display_name": "paths", "is_parts": "paths", "is_uri": "paths", "list_parts": "paths",
    "open_dataset": "paths", "skipped_part": "paths",
    "FORMATS": "sources", "check_format": "sources", "format_from_path": "sources",
    "iter_batches": "batches", "open_source": "sources", "parquet_rows": "parquet",
    "read_bytes": "sources", "read_table": "reading",
}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(import_module(f"calibcli.io.{_HOME[name]}"), name)
    raise AttributeError(f"module 'calibcli.io' has no attribute {name!r}")
