"""`calib apply`: stream a score file (or a directory of parts) through a saved map.

Every input column passes through and `--output-col` is added; memory stays at a few record
batches whatever the input size. Where the output goes and how each column type is written
is the io package's business (`io.targets`, `io.writing`).

Rows whose score is invalid (empty, NaN, infinite, or refused by the map: `io.refused_scores`)
stop the run by default (`on_invalid="error"`); `"null"` writes them with a null calibrated
value and `"skip"` leaves them out, counting them in `Applied.invalid`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pyarrow as pa

from calibcli import io
from calibcli.applying.plans import PLANS
from calibcli.errors import UsageError
from calibcli.io import targets, writing
from calibcli.kinds import kind_of
from calibcli.maps import envelope as maps
from calibcli.requests import ApplyRequest


@dataclass
class Applied:
    """What one `apply_file` did: rows read, rows written, rows with an invalid score, and rows
    whose field value a field-aware map never saw at fit (`unseen`; the first few such values
    per column in `unseen_examples`); the CLI reports the counts."""

    rows: int = 0
    written: int = 0
    invalid: int = 0
    unseen: int = 0
    unseen_examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, other: "Applied") -> None:
        self.rows += other.rows
        self.written += other.written
        self.invalid += other.invalid
        self.unseen += other.unseen
        for column, values in other.unseen_examples.items():
            known = self.unseen_examples.setdefault(column, [])
            known.extend(v for v in values if v not in known)


def apply_file(
    map_path: str,
    path: str,
    out: str = "-",
    request: ApplyRequest = ApplyRequest(),
    *,
    input_format: str | None = None,
    output_format: str | None = None,
    on_batch: Callable[[int], None] | None = None,
    force: bool = False,
) -> Applied:
    """Stream `path` through a saved map into `out`, as `request` says (`requests.ApplyRequest`).

    A K-class map reads the score columns it was fitted on, or `request.score_cols` (a
    `--score-cols` SPEC), and adds one column `<output_col>_<class>` per class (`plans.ClassPlan`).

    With `request.interval`, the map's `predict_interval` (Venn-Abers maps) adds the columns
    `<output_col>_low` and `<output_col>_high`.

    A directory or glob of Parquet parts is applied part by part into the directory `out`
    (with `force`, an existing directory calib wrote is replaced once the new one is complete).
    """
    if map_path == "-" and path == "-":
        raise UsageError("the map and the input cannot both come from stdin")
    parts = io.is_parts(path)
    targets.check_output(out, [map_path, path], directory=parts, force=force)
    if parts:
        return _apply_parts(map_path, path, out, output_format=output_format, force=force,
                            plan=lambda loaded: _plan(loaded, map_path, request),
                            input_format=input_format, on_batch=on_batch)
    if out != "-" and not targets.is_special(out):
        targets.output_format(out, output_format, "csv")  # an unknown extension fails before any work
    plan = _plan(maps.load_map(map_path), map_path, request)
    return _apply_one(plan, path, out, input_format=input_format, output_format=output_format, on_batch=on_batch)


def _plan(loaded, map_path: str, request: ApplyRequest):
    """How each batch is read and what it gains: the plan of the map's kind (`plans.PLANS`)."""
    calibrator, _ = loaded
    return PLANS[kind_of(calibrator)](calibrator, map_path, request)


def _apply_one(plan, path: str, out: str, *, input_format: str | None, output_format: str | None,
               on_batch: Callable[[int], None] | None) -> Applied:
    added = plan.added
    source, schema, batches = io.iter_batches(path, input_format, string_columns=plan.string_columns,
                                              float_columns=plan.float_columns, batch_rows=plan.batch_rows)
    name = source.name
    plan.check(schema, name)
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
    done = Applied()
    unseen_before = plan.unseen.rows
    with targets.atomic_output(out) as fh:
        writer = None  # created after the first batch checks out, so a bad first batch prints nothing
        try:
            for batch in batches:
                kept, columns, invalid = plan.predict(batch, name, done.rows)
                done.invalid += invalid
                out_batch = pa.RecordBatch.from_arrays([*kept.columns, *columns], schema=out_schema)
                writer = writer or writing.BatchWriter(fh, out_fmt, out_schema, gzip=gz)
                writer.write(out_batch)
                done.rows += batch.num_rows
                done.written += out_batch.num_rows
                if on_batch is not None:
                    on_batch(batch.num_rows)
        except BaseException:
            if writer is not None:
                writer.abort()  # its thread stops before the output file is closed and dropped
            raise
        (writer or writing.BatchWriter(fh, out_fmt, out_schema, gzip=gz)).close()
    done.unseen = plan.unseen.rows - unseen_before
    done.unseen_examples = {c: list(v) for c, v in plan.unseen.examples.items() if v}
    return done


def _apply_parts(map_path: str, path: str, out: str, *, plan, input_format: str | None,
                 output_format: str | None, on_batch: Callable[[int], None] | None, force: bool) -> Applied:
    """Apply a map to every Parquet part of a directory or glob, mirroring the parts under `out`.

    The output directory appears only when every part succeeded; its marker records the
    rows read and written and the invalid rows.
    """
    if out == "-":
        raise UsageError(f"{path}: a directory or glob of parts needs -o DIR (the parts are mirrored there)")
    if map_path == "-":
        raise UsageError("with a directory or glob of parts the map must be a file, not stdin")
    parts = io.list_parts(path)
    io.check_format(output_format)
    part_plan = plan(maps.load_map(map_path))  # a map the options do not fit is refused before any part
    done = Applied()
    with targets.atomic_output_dir(out, force=force) as tmp:
        for part, relative in parts:
            target = tmp.path / relative
            fmt = output_format or input_format or io.format_from_path(part) or "parquet"
            if fmt != io.format_from_path(part):
                target = target.with_suffix("." + fmt)
            target.parent.mkdir(parents=True, exist_ok=True)
            done.add(_apply_one(part_plan, part, str(target), input_format=input_format, output_format=fmt,
                                on_batch=on_batch))
        tmp.extra.update({"rows": done.rows, "written": done.written, "on_invalid": part_plan.on_invalid,
                          "invalid_rows": done.invalid, "unseen_field_rows": done.unseen})
    return done
