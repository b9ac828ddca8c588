"""`calib export --sql` of any saved map: the one dispatch, on the map's kind. A binary map gives
one expression of the score column (`sql.binary_sql`); a K-class map a select list, one line per
class, over its score columns (`kclass.select_list`), read as `apply` reads them
(`kinds.columns.map_columns`).
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from calibcli.errors import MapError, UsageError, shown
from calibcli.export.kclass import select_list
from calibcli.export.sql import SQLExport, binary_sql
from calibcli.kinds import BINARY, KCLASS, kind_of
from calibcli.kinds import columns as score_columns
from calibcli.requests import ExportRequest


def export_sql(map_path: str, column: str | None = None, expression: str | None = None, dialect: str = "ansi",
               max_knots: int | None = None, score_cols: Sequence[str] | None = None) -> SQLExport:
    """The SQL of the map saved at `map_path` (Python's `calib export --sql`)."""
    return export_map(map_path, ExportRequest.build(column, expression, dialect, max_knots, score_cols))


def export_map(map_path: str, request: ExportRequest) -> SQLExport:
    """`export_sql` for a checked request (the command builds it at the door)."""
    from calibcli import io
    from calibcli.maps import envelope as maps

    cal, _ = maps.load_map(map_path)
    return _EXPORTS[kind_of(cal)](cal, io.display_name(map_path), request)


def _binary(cal: Any, source: str, request: ExportRequest) -> SQLExport:
    if request.score_cols is not None:
        raise UsageError(f"{source}: --score-cols is for K-class maps; this {cal.name} map reads one "
                         "score column", hint="give it with --score-col")
    return binary_sql(source, cal, request)


def _kclass(cal: Any, source: str, request: ExportRequest) -> SQLExport:
    if request.expression is not None or request.column is not None:
        flag = "--score-expr" if request.expression is not None else "--score-col"
        raise UsageError(f"{flag} is for binary maps: a K-class map reads --score-cols",
                         hint="name its K score columns with --score-cols a,b,c (default: the columns it was fitted on)")
    if request.max_knots is not None:
        raise UsageError("--max-knots simplifies knot maps; K-class maps have no knots")
    example = ",".join(cal.score_cols) if cal.score_cols and len(cal.score_cols) <= 4 else "p_a,p_b,p_c"
    for name in request.score_cols or ():
        if re.search(r"[*?\[]", name):
            raise UsageError(f"{source}: --score-cols {shown(name)} is a pattern, but export reads no file to match "
                             f"it against: give the map's {cal.n_classes} score column names as a comma list",
                             hint=f"e.g. --score-cols {example}")
    spec = None if request.score_cols is None else ",".join(request.score_cols)
    schema = score_columns.named_schema(request.score_cols or cal.score_cols or ())
    cols = score_columns.map_columns(cal.classes_.tolist(), cal.score_cols, None, spec, schema, source, source)
    if cols.list_column is not None:
        raise UsageError(f"{source}: the map was fitted on a list column; SQL reads one column per class",
                         hint="name the K score columns with --score-cols a,b,c")
    try:
        return SQLExport(select_list(cal, list(cols.columns), request.dialect), 0, None, cal.n_classes, cal.name)
    except MapError as exc:
        raise MapError(f"{source}: {exc.message}", hint=exc.hint) from None


_EXPORTS = {BINARY: _binary, KCLASS: _kclass}

__all__ = ["export_map", "export_sql"]
