"""Score summaries: the one aggregation pass that score-only fits need, mergeable across chunks.

A summary is a table with one row per distinct score, sorted by score::

    score   n0 (weight of negatives)   n1 (weight of positives)

Without weights n0/n1 are row counts. Every score-only method (isotonic, binning, logistic,
beta, ...) fits on the summary exactly as on the rows it came from: `fit_rows` turns it
back into at most two weighted rows per score, (score, 0, n0) and (score, 1, n1), and a
weighted fit on those is the fit on the original rows (the counts are frequency weights).
With unit weights (or any whole-number weights) and 0/1 targets (`platt_correction=false`)
the pooled sums are the same integers, so isotonic and binning maps are bit-for-bit the maps
fitted on the rows; Platt's fractional targets (their default) make the sums depend on the
summation order, so the maps agree to rounding (1e-14). Logistic and beta optimise the
same objective and agree to optimiser tolerance. The resampling methods (boot-*) expand
whole-number counts into rows before drawing, so they give the rows' map exactly.

Summaries merge: `merge([summarize(chunk) for chunk in chunks])` equals `summarize` of all
rows, in any chunking and order (exactly for counts; for fractional weights up to
float rounding of the sums). That is what lets a distributed engine do the heavy pass.

Bucketing (`step`): optional, for data with more distinct scores than memory allows.
Each score is replaced by the nearest multiple of `step` (`rint(score / step) * step`),
so every training score moves by at most step/2 (plus one rounding of the product).
Consequences: rows more than one step apart keep their order, only rows within a step
may be pooled, and a map fitted on bucketed data, compared at the original score,
differs by at most (largest slope of the map) * step/2. With step = 1e-6 on scores in
[0, 1] the summary has at most 1e6 + 1 rows whatever the row count. Exactness (no
bucketing) is the default.

Producing a summary with Dask or Spark
--------------------------------------
The summary is a plain Parquet table with columns `score`, `n0`, `n1`, so any engine can
write it; `load` accepts a file or a directory of Parquet parts and merges duplicate
scores across parts. Spark::

    from pyspark.sql import functions as F
    (spark.read.parquet("scores/")
        .groupBy("score")
        .agg(F.sum(1 - F.col("label")).alias("n0"), F.sum("label").alias("n1"))
        .write.parquet("summary/"))

Dask, with calibcli's own functions on each partition::

    import dask, dask.dataframe as dd
    from calibcli import summary
    parts = dd.read_parquet("scores/", columns=["score", "label"]).to_delayed()
    partial = [dask.delayed(lambda df: summary.summarize(df["score"].to_numpy(),
                                                          df["label"].to_numpy()))(p)
               for p in parts]
    summary.save(dask.delayed(summary.merge)(partial).compute(), "summary.parquet")

then ``calib fit --from-summary summary/ --method isotonic -o map.json``. The tests run
the same map/reduce in plain Python over chunks (`tests/test_scale.py`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pyarrow as pa

from calibcli.maps import strictjson
from calibcli.numeric.pooling import aggregate, bucket
from calibcli.errors import UPGRADE_HINT, InputError, UsageError

FORMAT = "calibcli.fitting.summary"
SCHEMA_VERSION = 1
PARQUET_KEY = b"calibcli.fitting.summary"
SUMMARY_LIMITS = strictjson.Limits(max_bytes=2 << 30)


@dataclass
class ScoreSummary:
    """Per-distinct-score weights of negatives (`n0`) and positives (`n1`), sorted by score.

    `rows` and `positives` count input rows (not weights); `score_range` is the exact range
    of the input scores, also when they were bucketed; `step` is the bucket width or None.
    """

    score: np.ndarray
    n0: np.ndarray
    n1: np.ndarray
    rows: int
    positives: int
    score_range: tuple[float, float]
    weighted: bool = False
    step: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return int(self.score.size)

    def to_table(self) -> pa.Table:
        """The summary as a Parquet-ready table, header in the schema metadata."""
        header = {
            "format": FORMAT, "schema_version": SCHEMA_VERSION, "rows": self.rows,
            "positives": self.positives, "score_range": list(self.score_range),
            "weighted": self.weighted, "step": self.step, **self.meta,
        }
        table = pa.table({"score": self.score, "n0": self.n0, "n1": self.n1})
        return table.replace_schema_metadata({PARQUET_KEY: json.dumps(header).encode()})


def summarize(scores: Any, labels: Any, sample_weight: Any = None, step: float | None = None) -> ScoreSummary:
    """Summarise finite scores and 0/1 labels (optionally non-negative weights).

    Raises UsageError on malformed arrays; file readers validate rows before calling this.
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    y = np.asarray(labels, dtype=np.float64).ravel()
    if s.shape != y.shape:
        raise UsageError(f"scores and labels differ in length ({s.size} vs {y.size})")
    if not np.all(np.isfinite(s)):
        raise UsageError("scores must be finite (no NaN or inf)")
    if not np.all((y == 0) | (y == 1)):
        raise UsageError("labels must be 0 or 1")
    positive = y == 1
    if sample_weight is None:
        w1 = positive.astype(np.float64)
        w0 = 1.0 - w1
    else:
        w = np.asarray(sample_weight, dtype=np.float64).ravel()
        if w.shape != s.shape:
            raise UsageError(f"weights and scores differ in length ({w.size} vs {s.size})")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise UsageError("weights must be finite and non-negative")
        w1 = np.where(positive, w, 0.0)
        w0 = np.where(positive, 0.0, w)
    rng = (float(s.min()), float(s.max())) if s.size else (float("inf"), float("-inf"))
    if step is None and sample_weight is None:
        from calibcli.numeric.pooling import unique_with_sums  # the fit's own pooling: no argsort

        xs, count, n1 = unique_with_sums(s, y, np.ones_like(s))
        n0 = count - n1  # whole numbers: exact
    elif step is None:
        xs, n0, n1 = aggregate(s, w0, w1)
    elif s.size:
        xs, n0, n1 = bucket(s, w0, w1, float(step))
    else:
        xs, n0, n1 = s.copy(), w0.copy(), w1.copy()
    return ScoreSummary(xs, n0, n1, int(s.size), int(np.count_nonzero(positive)), rng,
                        weighted=sample_weight is not None, step=step)


def merge(summaries: Iterable[ScoreSummary]) -> ScoreSummary:
    """One summary of the union of the rows behind `summaries` (any number, any order)."""
    parts = list(summaries)
    if not parts:
        raise UsageError("nothing to merge: no summaries")
    steps = {p.step for p in parts}
    if len(steps) > 1:
        raise UsageError("cannot merge summaries bucketed with different steps: "
                         + ", ".join("none" if s is None else f"{s:g}" for s in steps))
    xs, n0, n1 = aggregate(np.concatenate([p.score for p in parts]),
                            np.concatenate([p.n0 for p in parts]),
                            np.concatenate([p.n1 for p in parts]))
    lo = min(p.score_range[0] for p in parts)
    hi = max(p.score_range[1] for p in parts)
    return ScoreSummary(xs, n0, n1, sum(p.rows for p in parts), sum(p.positives for p in parts),
                        (lo, hi), weighted=any(p.weighted for p in parts), step=parts[0].step)


def fit_rows(summary: ScoreSummary) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(scores, labels, weights) with one weighted row per score and class present.

    A weighted fit on these rows is the fit on the rows the summary came from.
    """
    has0 = summary.n0 > 0
    has1 = summary.n1 > 0
    s = np.concatenate([summary.score[has0], summary.score[has1]])
    y = np.concatenate([np.zeros(int(has0.sum())), np.ones(int(has1.sum()))])
    w = np.concatenate([summary.n0[has0], summary.n1[has1]])
    return s, y, w


# ---------------------------------------------------------------------------- files


MAX_SUMMARY_BYTES = 1 << 30  # ~1.5e7 distinct scores as JSON (use Parquet beyond); /dev/zero never ends
SUMMARY_EXTENSIONS = {".json": "json", ".parquet": "parquet", ".pq": "parquet"}


def output_format(path: str) -> str:
    """`parquet` for .parquet/.pq, `json` for .json, no extension or stdout; others refused."""
    from calibcli.io.targets import output_format as choose

    return choose(path, None, "json", SUMMARY_EXTENSIONS, ("json", "parquet"))[0]


def save(summary: ScoreSummary, path: str) -> None:
    """Write a summary as Parquet or JSON (see `output_format`; `-` = stdout JSON)."""
    from calibcli.io import targets

    if output_format(path) == "parquet":
        import pyarrow.parquet as pq

        targets.refuse_binary_tty(path, "parquet")
        with targets.atomic_output(path) as fh:
            pq.write_table(summary.to_table(), fh)
        return
    meta = json.loads(summary.to_table().schema.metadata[PARQUET_KEY])
    doc = {**meta, "score": summary.score.tolist(), "n0": summary.n0.tolist(), "n1": summary.n1.tolist()}
    targets.write_bytes_atomic(path, (json.dumps(doc, allow_nan=False) + "\n").encode())


_HEADER_KEYS = ("format", "schema_version", "rows", "positives", "score_range", "weighted", "step")
_TEXT_KEYS = ("input", "score_col", "label_col", "weight_col")
MAX_ROWS = 1 << 53  # row counts are kept exact in float64 sums


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _refuse(source: str, what: str) -> InputError:
    return InputError(f"{source}: corrupt calibcli summary: {what}",
                      hint="write summaries with `calib summarize`, or as Parquet columns score, n0, n1")


def check_header(header: Any, source: str) -> dict[str, Any]:
    """A summary's header, checked as strictly as user input: every field present with its
    type and a possible value (one line naming the field otherwise)."""
    if not isinstance(header, dict):
        raise _refuse(source, "the header is not an object")
    version = header.get("schema_version")
    if _whole(version) and version > SCHEMA_VERSION:
        raise InputError(f"{source}: summary schema version {version!r} is newer than this calibcli reads "
                         f"(up to {SCHEMA_VERSION})", hint=UPGRADE_HINT)
    missing = [k for k in _HEADER_KEYS if k not in header]
    if missing:
        raise _refuse(source, f"the header has no field {missing[0]!r}")
    if header["format"] != FORMAT:
        raise _refuse(source, f"header field 'format' must be {FORMAT!r}, got {header['format']!r:.60}")
    if not _whole(version) or version < 1:
        raise _refuse(source, f"header field 'schema_version' must be a whole number from 1, got {version!r:.60}")
    rows, positives = header["rows"], header["positives"]
    if not _whole(rows) or not 0 <= rows <= MAX_ROWS:
        raise _refuse(source, f"header field 'rows' must be a whole number from 0 to 2**53, got {rows!r:.60}")
    if not _whole(positives) or not 0 <= positives <= rows:
        raise _refuse(source, f"header field 'positives' must be a whole number from 0 to rows ({rows}), "
                      f"got {positives!r:.60}")
    rng = header["score_range"]
    if not (isinstance(rng, list) and len(rng) == 2 and all(_is_number(v) for v in rng)):
        raise _refuse(source, f"header field 'score_range' must be a list of two numbers, got {rng!r:.60}")
    lo, hi = float(rng[0]), float(rng[1])  # a JSON integer beyond float range is refused below
    if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
        raise _refuse(source, f"header field 'score_range' must be finite with low <= high, got {rng!r:.60}")
    if not isinstance(header["weighted"], bool):
        raise _refuse(source, f"header field 'weighted' must be true or false, got {header['weighted']!r:.60}")
    step = header["step"]
    if step is not None and not (_is_number(step) and np.isfinite(float(step)) and step > 0):
        raise _refuse(source, f"header field 'step' must be null or a positive number, got {step!r:.60}")
    for key in _TEXT_KEYS:
        if key in header and not isinstance(header[key], str):
            raise _refuse(source, f"header field {key!r} must be text, got {header[key]!r:.60}")
    return header


def _column_array(name: str, values: Any, source: str) -> np.ndarray:
    """A summary column as float64: numbers only (no text, booleans or nulls), finite, and
    counts >= 0."""
    if isinstance(values, list):
        odd = next((i for i, v in enumerate(values) if not _is_number(v)), None)
        if odd is not None:
            raise _refuse(source, f"column {name!r}, row {odd + 1}: {values[odd]!r:.60} is not a number")
    try:
        arr = np.asarray(values, dtype=np.float64).ravel()
    except (TypeError, ValueError, OverflowError):
        raise _refuse(source, f"column {name!r} must hold numbers") from None
    bad = ~np.isfinite(arr) | ((arr < 0) if name != "score" else False)
    if bad.any():
        i = int(np.argmax(bad))
        what = "finite" if name == "score" else "finite and >= 0"
        raise InputError(f"{source}: summary column {name!r}, row {i + 1}: {arr[i]!r} must be {what}")
    return arr


def _from_columns(score: Any, n0: Any, n1: Any, header: dict[str, Any] | None, source: str) -> ScoreSummary:
    """A summary from its columns and (checked) header, the two checked against each other;
    without a header (a Parquet summary from another engine) the counts give rows and range."""
    arrays = [_column_array(name, values, source) for name, values in (("score", score), ("n0", n0), ("n1", n1))]
    if not arrays[0].size == arrays[1].size == arrays[2].size:
        raise _refuse(source, "columns score, n0, n1 differ in length")
    xs, n0_, n1_ = aggregate(*arrays)
    with np.errstate(over="ignore"):
        total0, total1 = float(np.sum(n0_)), float(np.sum(n1_))
    if not np.isfinite(total0 + total1):
        raise _refuse(source, "the counts n0 + n1 add up to more than a float64 holds")
    if header is None:
        header = {"rows": int(round(total0 + total1)), "positives": int(round(total1)),
                  "score_range": [float(xs[0]), float(xs[-1])] if xs.size else [0.0, 0.0],
                  "weighted": False, "step": None}
    else:
        _check_body(header, xs, n0_, n1_, source)
    rng = header["score_range"]
    extra = {k: v for k, v in header.items() if k not in _HEADER_KEYS}
    return ScoreSummary(xs, n0_, n1_, header["rows"], header["positives"], (float(rng[0]), float(rng[1])),
                        weighted=header["weighted"], step=header["step"], meta=extra)


def _check_body(header: dict[str, Any], xs: np.ndarray, n0: np.ndarray, n1: np.ndarray, source: str) -> None:
    """What a header promises about its body: row counts equal to the counts (unweighted),
    no more scores than rows, and scores inside the score range (within a step)."""
    rows, positives, step = header["rows"], header["positives"], header["step"]
    if xs.size > rows:
        raise _refuse(source, f"header field 'rows' is {rows}, fewer than the {xs.size} distinct scores")
    if not header["weighted"]:
        whole = (n0 == np.floor(n0)) & (n1 == np.floor(n1))
        if not whole.all():
            i = int(np.argmax(~whole))
            raise _refuse(source, f"an unweighted summary counts whole rows, but score {float(xs[i])!r} has "
                          f"n0={float(n0[i])!r}, n1={float(n1[i])!r}")
        counted, counted1 = float(np.sum(n0) + np.sum(n1)), float(np.sum(n1))
        if counted != rows:
            raise _refuse(source, f"header field 'rows' is {rows}, but n0 + n1 add up to {counted:.17g}")
        if counted1 != positives:
            raise _refuse(source, f"header field 'positives' is {positives}, but n1 adds up to {counted1:.17g}")
    else:
        if float(np.sum(n1)) > 0 and positives == 0:
            raise _refuse(source, "header field 'positives' is 0, but n1 holds positive weight")
        if float(np.sum(n0)) > 0 and positives == rows:
            raise _refuse(source, f"header field 'positives' equals 'rows' ({rows}), but n0 holds negative weight")
    if xs.size:
        lo, hi = (float(v) for v in header["score_range"])
        slack = 0.0 if step is None else float(step)
        if xs[0] < lo - slack or xs[-1] > hi + slack or (step is None and (xs[0] != lo or xs[-1] != hi)):
            raise _refuse(source, f"header field 'score_range' is [{lo!r}, {hi!r}], but the scores run from "
                          f"{float(xs[0])!r} to {float(xs[-1])!r}")


def load(path: str) -> ScoreSummary:
    """Read a summary: a JSON or Parquet file from `save`, or any Parquet file or directory of
    parts with columns score, n0, n1 (e.g. written by Spark); duplicate scores are merged.

    A summary is checked as strictly as user input (`check_header`, `_check_body`): a header
    that says impossible things is refused with one line naming the file and the field."""
    from calibcli import io

    source = io.display_name(path)
    if io.is_parts(path):
        return _load_parquet([part for part, _ in io.list_parts(path)], source)
    data = io.read_bytes(path, "summary file", limit=MAX_SUMMARY_BYTES)
    if data[:4] == b"PAR1":
        return _load_parquet([pa.BufferReader(data)], source)
    try:
        doc = strictjson.loads(data, SUMMARY_LIMITS)
    except strictjson.StrictJSONError as exc:
        raise InputError(f"{source}: not a calibcli summary (neither Parquet nor JSON: {exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InputError(f"{source}: not a calibcli summary (no \"format\": \"{FORMAT}\" field)")
    header = check_header({k: v for k, v in doc.items() if k not in ("score", "n0", "n1")}, source)
    missing = [k for k in ("score", "n0", "n1") if not isinstance(doc.get(k), list)]
    if missing:
        raise InputError(f"{source}: summary is missing the list {missing[0]!r}")
    return _from_columns(doc["score"], doc["n0"], doc["n1"], header, source)


def _load_parquet(parts: Sequence[Any], source: str) -> ScoreSummary:
    """Each part checked against its own header (when it has one), then merged."""
    import pyarrow.parquet as pq

    summaries = []
    for part in parts:
        try:
            table = pq.read_table(part)
        except (pa.ArrowException, OSError) as exc:
            raise InputError(f"{source}: not a readable Parquet summary ({str(exc).splitlines()[0]})") from None
        missing = [c for c in ("score", "n0", "n1") if c not in table.column_names]
        if missing:
            raise InputError(f"{source}: summary has no column {missing[0]!r}",
                             hint="a summary has the columns score, n0 (negatives), n1 (positives)")
        for name in ("score", "n0", "n1"):
            kind = table.schema.field(name).type
            if not (pa.types.is_floating(kind) or pa.types.is_integer(kind) or pa.types.is_decimal(kind)):
                raise _refuse(source, f"column {name!r} has type {kind}, expected numbers")
        raw = (table.schema.metadata or {}).get(PARQUET_KEY)
        header = None
        if raw is not None:
            try:
                header = check_header(strictjson.loads(raw), source)
            except strictjson.StrictJSONError as exc:
                raise _refuse(source, f"the header is not JSON ({exc})") from None
        cols = [np.asarray(_pc_cast(table.column(c)).fill_null(float("nan"))) for c in ("score", "n0", "n1")]
        summaries.append(_from_columns(*cols, header, source))
    if len(summaries) == 1:
        return summaries[0]
    try:
        merged = merge(summaries)
    except UsageError as exc:
        raise InputError(f"{source}: the parts {exc.message}") from None
    return merged


def _pc_cast(column: Any) -> Any:
    import pyarrow.compute as pc

    return pc.cast(column, pa.float64(), safe=False)


def summarize_batches(batches: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray | None]],
                      step: float | None = None) -> ScoreSummary:
    """Map/reduce over chunks: `summarize` each (scores, labels, weights) chunk, then `merge`.

    Partial summaries are compacted whenever they hold more entries than the last merged
    result plus a chunk's worth, so memory follows the number of distinct scores.
    """
    pending: list[ScoreSummary] = []
    pending_size = 0
    merged_size = 0
    for s, y, w in batches:
        part = summarize(s, y, w, step=step)
        pending.append(part)
        pending_size += part.size
        if pending_size > 2 * merged_size + (1 << 22):
            pending = [merge(pending)]
            pending_size = merged_size = pending[0].size
    if not pending:
        return summarize(np.empty(0), np.empty(0), step=step)
    return merge(pending)


def summarize_file(path: str, *, score_col: str = "score", label_col: str = "label",
                   weight_col: str | None = None, fmt: str | None = None, step: float | None = None,
                   on_batch: Callable[[int], None] | None = None, pos_label: str | None = None) -> ScoreSummary:
    """Stream a score/label file (or a directory, glob or URI of Parquet parts) into a summary."""
    from calibcli import io
    from calibcli.requests.names import column_options

    from calibcli.kinds import labels
    from calibcli.requests.names import column_options

    column_options([("--score-col", score_col), ("--label-col", label_col), ("--weight-col", weight_col)])
    reader = labels.BinaryLabels(pos_label)

    def chunks():
        source, _, batches = io.iter_batches(path, fmt)  # a directory, glob or URI of parts is one dataset
        rows = 0
        total = 0.0
        for batch in batches:
            s = io.scores_from(batch, score_col, source.name, offset=rows)
            y = labels.from_file(batch, label_col, source.name, reader, offset=rows)
            w = io.weights_from(batch, weight_col, source.name, offset=rows) if weight_col else None
            if w is not None:
                with np.errstate(over="ignore"):
                    total += float(np.sum(w))
                if not np.isfinite(total):  # a summary holds the sums: they must be float64 numbers
                    raise InputError(f"{source.name}: column {weight_col!r}: the weights add up to more than the "
                                     "largest float64 (1.8e+308), which a summary's counts cannot hold",
                                     hint="divide the weights by a common factor (a fit's map is the same for "
                                     "--weight-kind importance)")
            rows += batch.num_rows
            if on_batch is not None:
                on_batch(batch.num_rows)
            yield s, y, w
        if weight_col and rows and total == 0:
            raise InputError(f"{source.name}: column {weight_col!r}: all weights are zero: a summary needs weighted rows",
                             hint="check --weight-col")

    result = summarize_batches(chunks(), step=step)
    if result.rows == 0:
        raise InputError(f"{io.display_name(path)}: no data rows")
    result.meta.update({"input": io.display_name(path), "score_col": score_col, "label_col": label_col,
                        **({"weight_col": weight_col} if weight_col else {})})
    return result
