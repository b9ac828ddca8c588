"""`calib apply`: stream a score file (or a directory of parts) through a saved map.

Every input column passes through and `--output-col` is added; memory stays at a few record
batches whatever the input size. Where the output goes and how each column type is written
is the io package's business (`io.targets`, `io.writing`).
"""

from __future__ import annotations

from typing import Callable

import pyarrow as pa

from calibcli import io, maps
from calibcli.errors import InputError, UsageError
from calibcli.io import targets, writing


def apply_file(
    map_path: str,
    path: str,
    out: str = "-",
    *,
    score_col: str = "score",
    output_col: str = "calibrated",
    input_format: str | None = None,
    output_format: str | None = None,
    on_batch: Callable[[int], None] | None = None,
    force: bool = False,
    interval: bool = False,
) -> int:
    """Stream `path` through a saved map into `out`; returns the number of rows written.

    With `interval`, the map's `predict_interval` (Venn-Abers maps) adds the columns
    `<output_col>_low` and `<output_col>_high`.

    A directory or glob of Parquet parts is applied part by part into the directory `out`
    (with `force`, an existing one is replaced once the new one is complete).
    """
    if map_path == "-" and path == "-":
        raise UsageError("the map and the input cannot both come from stdin")
    parts = io.is_parts(path)
    targets.check_output(out, [map_path, path], directory=parts)
    if parts:
        return _apply_parts(map_path, path, out, score_col=score_col, output_col=output_col,
                            input_format=input_format, output_format=output_format, on_batch=on_batch,
                            force=force, interval=interval)
    if out != "-" and not targets.is_special(out):
        targets.output_format(out, output_format, "csv")  # an unknown extension fails before any work
    calibrator, _ = maps.load_map(map_path)
    added = [output_col, *interval_columns(calibrator, output_col, map_path, interval)]
    categorical, numeric = calibrator.input_features()
    source, schema, batches = io.iter_batches(path, input_format, string_columns=tuple(categorical))
    name = source.name
    if score_col not in schema.names:
        raise io.missing_column(score_col, schema.names, name, "--score-col")
    missing = [c for c in (*categorical, *numeric) if c not in schema.names]
    if missing:
        raise InputError(f"{name}: the map needs feature column(s) {', '.join(map(repr, missing))}, "
                         f"which the input does not have")
    for col in added:
        if col in schema.names:
            raise UsageError(f"{name}: input already has a column {col!r}",
                             hint="choose another name with --output-col")
    out_fmt, gz = targets.output_format(out, output_format, source.format)
    targets.refuse_binary_tty(out, out_fmt)
    out_schema = schema
    for col in added:
        out_schema = out_schema.append(pa.field(col, pa.float64()))
    out_schema = writing.writable_schema(out_schema, out_fmt)
    rows = 0
    with targets.atomic_output(out) as fh:
        writer = None  # created after the first batch checks out, so a bad first batch prints nothing
        for batch in batches:
            s = io.scores_from(batch, score_col, name, offset=rows)
            io.check_scores_for(calibrator, s, score_col, name, map_path, rows)
            feats = io.map_features(batch, categorical, numeric, name, rows) or None
            p = calibrator.predict(s, feats)
            extra = [pa.array(v) for v in calibrator.predict_interval(s)] if interval else []
            batch = pa.RecordBatch.from_arrays([*batch.columns, pa.array(p), *extra], schema=out_schema)
            writer = writer or writing.BatchWriter(fh, out_fmt, out_schema, gzip=gz)
            writer.write(batch)
            rows += batch.num_rows
            if on_batch is not None:
                on_batch(batch.num_rows)
        (writer or writing.BatchWriter(fh, out_fmt, out_schema, gzip=gz)).close()
    return rows


def _apply_parts(map_path: str, path: str, out: str, *, score_col: str, output_col: str,
                 input_format: str | None, output_format: str | None,
                 on_batch: Callable[[int], None] | None, force: bool, interval: bool = False) -> int:
    """Apply a map to every Parquet part of a directory or glob, mirroring the parts under `out`.

    The output directory appears only when every part succeeded.
    """
    if out == "-":
        raise UsageError(f"{path}: a directory or glob of parts needs -o DIR (the parts are mirrored there)")
    if map_path == "-":
        raise UsageError("with a directory or glob of parts the map must be a file, not stdin")
    parts = io.list_parts(path)
    io.check_format(output_format)
    rows = 0
    interval_columns(maps.load_map(map_path)[0], output_col, map_path, interval)  # refused before any part
    with targets.atomic_output_dir(out, force=force) as tmp:
        for part, relative in parts:
            target = tmp / relative
            fmt = output_format or input_format or io.format_from_path(part) or "parquet"
            if fmt != io.format_from_path(part):
                target = target.with_suffix("." + fmt)
            target.parent.mkdir(parents=True, exist_ok=True)
            rows += apply_file(map_path, part, str(target), score_col=score_col, output_col=output_col,
                               input_format=input_format, output_format=fmt, on_batch=on_batch,
                               interval=interval)
    return rows


def interval_columns(calibrator, output_col: str, map_path: str, interval: bool) -> list[str]:
    """The columns `--interval` adds, or a UsageError when the map has no interval."""
    if not interval:
        return []
    if not hasattr(calibrator, "predict_interval"):
        raise UsageError(f"{map_path}: --interval needs a map with a probability interval (venn-abers); "
                         f"{calibrator.name} maps have none")
    return [f"{output_col}_low", f"{output_col}_high"]
