"""`calib export --sql`: the SQL expression, run in DuckDB, equals `calib apply` to 1e-12."""

import json

import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from calibcli.export import sql as export
from calibcli.calibrators import registry
from calibcli.cli.app import app
from sql_cases import CASES, build

duckdb = pytest.importorskip("duckdb", reason="duckdb is not installed (pip install calibcli[dev])")
runner = CliRunner()


def run_duckdb(sql: str, scores: np.ndarray, column: str = "score") -> np.ndarray:
    con = duckdb.connect()
    con.register("queries", pa.table({column: scores, "i": np.arange(scores.size)}))
    out = con.sql(f"SELECT {sql} AS p FROM queries ORDER BY i").to_arrow_table()
    return out.column("p").to_numpy(zero_copy_only=False)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_sql_in_duckdb_equals_calib_apply(tmp_path, case):
    map_path, cal, scores, expected = build(tmp_path, case)
    result = runner.invoke(app, ["export", map_path, "--sql"])
    assert result.exit_code == 0, result.output
    sql = result.stdout.strip()
    assert "\n" not in sql
    got = run_duckdb(sql, scores)
    assert got.dtype == np.float64 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    assert np.all((got >= 0) & (got <= 1))


def test_piecewise_linear_maps_are_bit_exact_in_duckdb(tmp_path):
    """Knot and bin maps use numpy's own arithmetic: DuckDB's doubles give the same bits."""
    for case in CASES:
        if case[1] in {"isotonic", "binning", "enir", "venn-abers", "bbq"}:
            map_path, _, scores, expected = build(tmp_path, case)
            got = run_duckdb(export.export_sql(map_path).sql, scores)
            assert np.array_equal(got, expected), case[0]


def test_worked_isotonic_case_by_hand():
    """Knots (0, 0.2), (1, 0.6), (3, 1): closed-form values below, on, between and above knots."""
    cal = registry.get("isotonic").from_state({}, {"x": [0.0, 1.0, 3.0], "y": [0.2, 0.6, 1.0]})
    scores = np.array([-5.0, 0.0, 0.5, 1.0, 2.0, 3.0, 7.0])
    got = run_duckdb(export.sql_expression(cal), scores)
    np.testing.assert_allclose(got, [0.2, 0.2, 0.4, 0.6, 0.8, 1.0, 1.0], rtol=0, atol=1e-15)


def test_worked_binning_case_edges_belong_to_the_bin_below():
    cal = registry.get("binning").from_state({}, {"edges": [0.3, 0.6], "values": [0.1, 0.5, 0.9]})
    got = run_duckdb(export.sql_expression(cal), np.array([0.0, 0.3, 0.30000001, 0.6, 0.61, 5.0]))
    assert got.tolist() == [0.1, 0.1, 0.5, 0.5, 0.9, 0.9]


def test_logistic_extremes_do_not_overflow():
    cal = registry.get("logistic").from_state({}, {"a": 50.0, "b": -1.0})
    got = run_duckdb(export.sql_expression(cal), np.array([-1e10, -20.0, 0.02, 20.0, 1e10]))
    from scipy.special import expit

    np.testing.assert_allclose(got, expit([-1e10 * 50 - 1, -1001.0, 0.0, 999.0, 1e10 * 50 - 1]), rtol=1e-15, atol=0)


def test_null_scores_give_null_and_quoted_columns_work(tmp_path):
    cal = registry.get("isotonic").from_state({}, {"x": [0.0, 1.0], "y": [0.1, 0.9]})
    con = duckdb.connect()
    con.register("t", pa.table({"my score": pa.array([0.5, None, 2.0], pa.float64())}))
    sql = export.sql_expression(cal, export.quote_identifier("my score"))
    assert con.execute(f"SELECT {sql} FROM t").fetchall() == [(0.5,), (None,), (0.9,)]


@pytest.mark.parametrize("method,params", [("beta", {}), ("ilps", {"K": "20"})])
def test_probability_maps_give_null_where_calib_apply_refuses(tmp_path, method, params):
    """Beta and ilps maps fitted on probabilities: SQL gives NULL for a score outside [0, 1]
    (`calib apply` refuses it) and the map's value inside, both ends included; with
    score_kind=logit every finite score has a value."""
    rng = np.random.default_rng(5)
    s = rng.uniform(0.02, 0.98, 3000)
    y = (rng.random(3000) < s).astype(float)
    cal = registry.get(method).from_cli(params).fit(s, y)
    scores = np.array([-0.2, 0.0, 0.5, 1.0, 1.3])
    got = run_duckdb(export.sql_expression(cal), scores)
    assert np.isnan(got[[0, 4]]).all()
    np.testing.assert_allclose(got[1:4], cal.predict(scores[1:4]), rtol=0, atol=1e-12)
    logit = registry.get(method).from_cli({**params, "score_kind": "logit"}).fit(np.log(s / (1 - s)), y)
    assert not np.isnan(run_duckdb(export.sql_expression(logit), scores)).any()


def test_literals_parse_back_to_the_same_bits():
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.standard_normal(200) * 10.0 ** rng.integers(-300, 300, 200),
                             [0.0, -0.0, 1.0, 0.1, 1e-12, 1 - 1e-12, 5e-324, 1.7976931348623157e308]])
    sql = ", ".join(f"{export.literal(v)} AS c{i}" for i, v in enumerate(values))
    row = duckdb.connect().execute(f"SELECT {sql}").fetchone()
    assert np.array_equal(np.array(row, dtype=np.float64), values)
    assert all(export.literal(v).rstrip(")").upper().count("E") == 1 for v in values)


@pytest.mark.parametrize("method", ["boot-isotonic"])
def test_other_methods_are_refused_with_one_line(tmp_path, method):
    from sql_cases import training_table
    import pyarrow.parquet as pq

    train = tmp_path / "t.parquet"
    pq.write_table(training_table(False, n=400), train)
    m = tmp_path / "m.json"
    assert runner.invoke(app, ["-q", "fit", str(train), "-m", method, "-o", str(m)]).exit_code == 0
    result = runner.invoke(app, ["export", str(m), "--sql"])
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and lines[0].endswith(f"m.json: a {method} map cannot be exported as SQL")
    assert lines[1].startswith("hint: SQL export supports isotonic")


def test_export_needs_a_format_and_a_valid_map(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"hello": 1}))
    result = runner.invoke(app, ["export", str(bad), "--sql"])
    assert result.exit_code == 2 and result.stderr.startswith("error: ")
    result = runner.invoke(app, ["export", str(bad)])
    assert result.exit_code == 2 and "choose an export format" in result.stderr


# --- the score: a quoted column or a checked expression -------------------------------------------

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

import extremes  # noqa: E402
from calibcli.maps import envelope as maps  # noqa: E402
from sql_cases import EXTREME_SCORES, HOSTILE_COLUMNS, HOSTILE_EXPRESSIONS  # noqa: E402

KNOTS = {"x": [0.1, 0.4, 0.7], "y": [0.05, 0.5, 0.8]}
SCORES = np.array([0.0, 0.1, 0.25, 0.4, 0.55, 0.7, 1.0, -3.0, 9.0])


@pytest.fixture(scope="module")
def knot_map(tmp_path_factory):
    path = tmp_path_factory.mktemp("maps") / "iso.json"
    cal = registry.get("isotonic").from_state({}, KNOTS)
    maps.save_map(cal, str(path))
    return str(path), cal


def _victim_db(column: str, scores=SCORES):
    """A DuckDB with table `data` (column `column`, row order `_i`) and a table `victim`."""
    con = duckdb.connect()
    con.register("src", pa.table({column: pa.array(scores, pa.float64()), "\x01_i": np.arange(len(scores))}))
    con.execute('CREATE TABLE data AS SELECT * FROM src')
    con.unregister("src")
    con.execute("CREATE TABLE victim (a INTEGER)")
    return con


def _run_whole(con, sql: str) -> np.ndarray:
    """Run `SELECT <sql> ... FROM data` as one string, as a shell would pass it, checking it is
    one statement; the victim table must survive."""
    query = f'SELECT {sql} AS p FROM data ORDER BY "\x01_i"'
    assert len(duckdb.extract_statements(query)) == 1
    out = con.execute(query).fetchall()
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'victim'").fetchone() == (1,)
    return np.array([np.nan if r[0] is None else r[0] for r in out], dtype=np.float64)


HOSTILE_TEXT = st.lists(st.sampled_from([
    ";", "--", "/*", "*/", "'", '"', "`", "\\", "$$", "$", "#", "(", ")", " ", "\n", "\x00", "\t", "é", "₂",
    "DROP TABLE victim", "SELECT 1", "score", "END", "${x}", "E'", "[", "]",
]), max_size=12).map("".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.one_of(HOSTILE_TEXT, st.text(st.characters(exclude_categories=("Cs",)), max_size=16))
       .filter(lambda s: s != "" and s.lower() != "\x01_i"))
def test_any_column_name_is_one_quoted_identifier(knot_map, name):
    """Whatever the name (quotes, `;`, `--`, `/*`, newlines, any unicode), the exported SQL reads
    that column and gives `predict`'s values, as one statement, and drops nothing; a NUL,
    which DuckDB cannot name in SQL, and a blank name (issue #33: no one can see which column it
    is), are refused."""
    path, cal = knot_map
    result = runner.invoke(app, ["export", path, "--sql", "--score-col", name])
    if "\x00" in name or not name.strip():  # DuckDB cannot refer to such a column; a blank name names none
        assert result.exit_code == 2 and result.stderr.startswith("error: --score-col") and result.stdout == ""
        return
    assert result.exit_code == 0, result.output
    got = _run_whole(_victim_db(name), result.stdout.rstrip("\n"))
    np.testing.assert_array_equal(got, cal.predict(SCORES))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(expr=HOSTILE_TEXT)
def test_hostile_expressions_are_refused_or_one_expression(knot_map, expr):
    path, cal = knot_map
    result = runner.invoke(app, ["export", path, "--sql", "--score-expr", expr])
    if result.exit_code != 0:
        assert result.exit_code == 2 and result.stdout == ""
        assert result.stderr.startswith("error: --score-expr") or "must be a SQL expression" in result.stderr
        return
    con = _victim_db("score")
    query = f"SELECT {result.stdout.rstrip()} AS p FROM data"
    try:
        assert len(duckdb.extract_statements(query)) == 1
        con.execute(query).fetchall()
    except duckdb.Error:
        pass  # a wrong expression may fail; it must not run anything else
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'victim'").fetchone() == (1,)


@pytest.mark.parametrize("expr", HOSTILE_EXPRESSIONS)
@pytest.mark.parametrize("dialect", ["ansi", "spark"])
def test_known_injections_are_refused_with_one_line(knot_map, expr, dialect):
    result = runner.invoke(app, ["export", knot_map[0], "--sql", "--dialect", dialect, "--score-expr", expr])
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: --score-expr ") and len(lines) == 2 and lines[1].startswith("hint: ")


@pytest.mark.parametrize("name", HOSTILE_COLUMNS)
def test_known_hostile_columns_are_names(knot_map, name):
    path, cal = knot_map
    result = runner.invoke(app, ["export", path, "--sql", "--score-col", name])
    assert result.exit_code == 0
    np.testing.assert_array_equal(_run_whole(_victim_db(name), result.stdout.strip()), cal.predict(SCORES))


def test_expressions_that_are_fine_work(knot_map):
    path, cal = knot_map
    con = _victim_db("raw")
    for expr, f in [("raw", lambda s: s), ("CAST(raw AS DOUBLE) / 2", lambda s: s / 2),
                    ("CASE WHEN raw > 0.5 THEN raw ELSE 0.1 END", lambda s: np.where(s > 0.5, s, 0.1)),
                    ("coalesce(raw, 0) + length('a;b--c/*''d\"') * 0", lambda s: s),
                    ('"raw" * 1', lambda s: s)]:
        result = runner.invoke(app, ["export", path, "--sql", "--score-expr", expr])
        assert result.exit_code == 0, (expr, result.output)
        np.testing.assert_array_equal(_run_whole(con, result.stdout.strip()), cal.predict(f(SCORES)), err_msg=expr)


def test_score_col_and_score_expr_exclude_each_other_and_dialects_are_checked(knot_map):
    for args in (["--score-col", "a", "--score-expr", "a"], ["--dialect", "oracle"], ["--score-col", ""],
                 ["--score-expr", "  "], ["--max-knots", "1"]):
        result = runner.invoke(app, ["export", knot_map[0], "--sql", *args])
        assert result.exit_code == 2 and result.stdout == "", args
        assert len(result.stderr.strip().splitlines()) <= 2, result.stderr


def test_spark_dialect_quotes_with_backticks(knot_map):
    result = runner.invoke(app, ["export", knot_map[0], "--sql", "--dialect", "spark", "--score-col", "a`b"])
    assert result.exit_code == 0 and "`a``b`" in result.stdout and '"' not in result.stdout
    assert export.quote_identifier('a"b') == '"a""b"'


# --- no value: NULL, NaN and the ends of float64 --------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_extreme_scores_give_predict_or_null(tmp_path, case):
    """NULL and NaN give NULL (never a probability); ±inf, subnormals and ±1e308 give `predict`'s
    value to 1e-12 relative, or NULL where `calib apply` refuses the score (outside [0, 1] for
    a map fitted on probabilities) or `predict` has none."""
    map_path, cal, _, _ = build(tmp_path, case)
    result = runner.invoke(app, ["export", map_path, "--sql"])
    assert result.exit_code == 0, result.output
    con = duckdb.connect()
    con.register("q", pa.table({"score": pa.array(EXTREME_SCORES, pa.float64()), "i": np.arange(len(EXTREME_SCORES))}))
    rows = con.execute(f"SELECT {result.stdout.strip()} AS p FROM q ORDER BY i").fetchall()
    got = [r[0] for r in rows]
    s = np.array([np.nan if v is None else v for v in EXTREME_SCORES])
    with np.errstate(all="ignore"):
        want = cal.predict(s)
    refused = np.isnan(s) | np.isnan(want) | (cal.needs_probabilities & ((s < 0) | (s > 1)))
    for value, g, w, r in zip(EXTREME_SCORES, got, want, refused):
        if r:
            assert g is None or np.isnan(g), (value, g)
        else:
            assert g is not None and 0 <= g <= 1, (value, g)
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=0, err_msg=f"score {value!r}")


# --- maps fitted at the ends of float64: subnormal gaps, spans of +-1e308 ----------------------------

# every SQL method and the parameters that reach its other branches (score_kind=logit), kept fast
SQL_FITS = [("isotonic", {}), ("isotonic", {"platt_correction": True}), ("enir", {"models": 10}),
            ("near-isotonic", {}), ("bayes-iso", {"samples": 100}), ("binning", {"n_bins": 7}),
            ("binning", {"n_bins": 7, "strategy": "width"}), ("logistic", {}), ("beta", {}), ("beta-am", {}),
            ("beta-ab", {}), ("beta", {"score_kind": "logit"}), ("ilps", {"K": 5}),
            ("ilps", {"K": 5, "score_kind": "logit"}), ("venn-abers", {}), ("venn-abers", {"loss": "brier"}),
            ("bbq", {}), ("bbq", {"variant": "netcal"}), ("spline", {}), ("spline", {"score_kind": "logit"})]
assert {m for m, _ in SQL_FITS} == set(export.SQL_METHODS)
EXTREME_SETTINGS = settings(max_examples=6, deadline=None, derandomize=True,
                            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                   HealthCheck.filter_too_much])


def fit_extreme(method: str, params: dict, s: np.ndarray, y: np.ndarray):
    """The fitted map, or None where the fit refuses the data with a FitError."""
    import warnings

    from calibcli.errors import CalibWarning, FitError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CalibWarning)
            return registry.get(method)(**params).fit(s, y)
    except FitError:
        return None


def extreme_queries(cal, s: np.ndarray) -> np.ndarray:
    """Training scores and their neighbours, the map's break points with points inside every knot
    interval (ends, neighbours, midpoint, fractions), subnormals and the ends of float64."""
    parts = [s, extremes.SUBNORMALS, [-extremes.HUGE, extremes.HUGE, -1e308, 1e308, 0.5, 1.0, float("inf"),
                                      float("-inf")]]
    for attr in ("x_", "edges_"):
        if hasattr(cal, attr):
            parts.append(getattr(cal, attr))
    if cal.name == "venn-abers":
        parts.append(cal.c_[0])
    if hasattr(cal, "x_") and cal.x_.size > 1:
        x0, x1 = cal.x_[:-1], cal.x_[1:]
        half = x1 * 0.5 - x0 * 0.5
        parts += [x0 + half, x1 - half]
        with np.errstate(over="ignore"):
            parts += [x0 + half * f for f in (2 ** -40, 0.125, 0.3, 0.9, 1.999)]
    with np.errstate(over="ignore", invalid="ignore"):
        q = np.concatenate([np.asarray(p, dtype=np.float64) for p in parts])
        q = np.concatenate([q, np.nextafter(q, -np.inf), np.nextafter(q, np.inf)])
    q = q[~np.isnan(q)]
    if cal.needs_probabilities:
        q = q[(q >= 0) & (q <= 1)]
    return np.unique(q)


TINY_NORMAL = float(np.finfo(np.float64).tiny)  # below it a probability has no relative precision


def eta_rounding(cal, q: np.ndarray) -> np.ndarray | float:
    """For beta maps on logits, a bound on the rounding in eta = a f1 + b f2 + c, whose softplus
    features SQL writes as LN(1 + EXP(-|t|)) (no log1p): a few ulps of 1 in each feature and of
    each term. A relative error in p is at most (1 - p) times the error in eta. 0 for other maps."""
    if not (cal.name.startswith("beta") and cal.params.get("score_kind") == "logit"):
        return 0.0
    from calibcli.calibrators.beta import clip_scores, log_features

    f1, f2 = log_features(clip_scores(q, "logit", cal.eps_)[0], "logit")
    eps = np.finfo(np.float64).eps
    return 8 * eps * (abs(cal.a_) * (1 + np.abs(f1)) + abs(cal.b_) * (1 + np.abs(f2)) + abs(cal.c_))


def assert_sql_is_predict(cal, q: np.ndarray) -> None:
    """DuckDB's value of the exported SQL equals `predict` to 1e-12 relative (or both below the
    normal range: a sigmoid 0 from exp overflow beside a subnormal), bit for bit for knot and
    bin maps, NULL where it has none."""
    got = run_duckdb(export.sql_expression(cal), q)
    with np.errstate(all="ignore"):
        want = cal.predict(q)
    none = np.isnan(want)
    got_none = np.array([g is None or np.isnan(g) for g in got.tolist()])
    np.testing.assert_array_equal(got_none, none, err_msg=f"{cal.name}: NULL rows differ")
    g, w = got[~none].astype(np.float64), want[~none]
    if hasattr(cal, "x_") or hasattr(cal, "edges_") or cal.name == "venn-abers":  # the same arithmetic, bits
        assert np.array_equal(g, w), f"{cal.name}: at {q[~none][g != w][:3].tolist()!r} SQL {g[g != w][:3]!r}"
    bad = np.abs(g - w) > np.maximum((1e-12 + eta_rounding(cal, q[~none])) * np.abs(w), TINY_NORMAL)
    assert not bad.any(), (f"{cal.name} {cal.params}: at {q[~none][bad][:3].tolist()!r} SQL "
                           f"{g[bad][:3].tolist()!r} vs predict {w[bad][:3].tolist()!r}")


@pytest.mark.parametrize("kind", sorted(extremes.KINDS))
@pytest.mark.parametrize("method, params", SQL_FITS, ids=[f"{m}{'-' if p else ''}{'-'.join(map(str, p.values()))}"
                                                          for m, p in SQL_FITS])
def test_maps_fitted_on_extreme_scores_export_predict(method, params, kind):
    """Fits on subnormal gaps, +-1e308 spans and both: the SQL gives `predict`'s values on the
    training scores, inside every knot interval (extreme ones included) and at the float64 ends."""
    probabilities = registry.get(method)(**params).needs_probabilities
    if probabilities and kind != "subnormal":
        pytest.skip("the map takes probabilities: scores beyond [0, 1] are refused at fit")

    @EXTREME_SETTINGS
    @given(data=st.one_of(extremes.score_sets(kind), extremes.separated_sets(kind)))
    def inner(data):
        s, y = data
        cal = fit_extreme(method, params, s, y)
        if cal is not None:
            assert_sql_is_predict(cal, extreme_queries(cal, s))

    inner()


EXTREME_KNOTS = [  # (x, y): overflowing gaps, subnormal gaps whose slope overflows or is subnormal
    ([-extremes.HUGE, 0.0, 7.4e-322, 1e308], [0.0, 0.2, 0.9, 1.0]),
    ([-1e308, 1e308], [0.25, 0.75]),
    ([0.0, 5e-324, 1e-322, 1.0, 1e308], [1e-300, 0.5, 0.5, 0.6, 1.0]),
    ([-1.0, 0.0, 1e120, 2e120], [0.0, 1e-200, 2e-200, 1.0]),
    ([-1e308, -1e-300, 0.0, 1e308], [0.0, 1e-320, 0.7, 1.0]),
]


@pytest.mark.parametrize("x, y", EXTREME_KNOTS)
def test_extreme_knot_intervals_export_interval_values(x, y):
    """Knot maps with extreme intervals: the SQL equals `predict` (which is not the slope formula
    there) on points inside them, and the ordinary intervals stay bit-exact with np.interp."""
    from calibcli.numeric import lookup as _lookup

    x, y = np.array(x), np.array(y)
    cal = registry.get("isotonic").from_state({}, {"x": x, "y": y})
    assert _lookup.extreme_intervals(x, y).size
    q = extreme_queries(cal, x)
    assert_sql_is_predict(cal, q)
    assert not np.array_equal(cal.predict(q), np.interp(q, x, y))  # predict is not the slope formula there
    j = np.searchsorted(x, q, side="right") - 1
    ordinary = ~np.isin(j, _lookup.extreme_intervals(x, y))
    assert np.array_equal(run_duckdb(export.sql_expression(cal), q)[ordinary], np.interp(q, x, y)[ordinary])


def test_logistic_fitted_on_scores_near_the_float64_limit_exports_its_predict():
    """The fit scales scores by a power of two and folds it back into a: the SQL uses that a."""
    s = np.array([-1.5e308, -1e308, -5e307, 0.0, 5e307, 1e308, 1.5e308, 1.7e308] * 2)
    y = np.array([0, 0, 1, 0, 1, 0, 1, 1] * 2, dtype=np.float64)
    cal = registry.get("logistic")().fit(s, y)
    assert 0 < cal.a_ < 1e-300
    q = np.concatenate([s, extremes.HUGE * np.linspace(-1.0, 1.0, 101)])
    assert_sql_is_predict(cal, q)
    assert np.ptp(cal.predict(q)) > 0.1  # the map is not flat: a survived the scaling


# --- --max-knots: bounded error, monotone, SQL of the simplified map ------------------------------

@st.composite
def monotone_knots(draw):
    n = draw(st.integers(3, 60))
    gaps = draw(st.lists(st.floats(1e-3, 1.0), min_size=n, max_size=n))
    steps = draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n))
    x = np.cumsum(gaps) - 0.5
    y = np.cumsum(steps)
    y = y / y[-1] if y[-1] > 0 else y
    if draw(st.booleans()):
        y = 1.0 - y  # decreasing maps too
    return x, np.clip(y, 0.0, 1.0), draw(st.integers(2, n))


def _dense_grid(x: np.ndarray) -> np.ndarray:
    between = (x[:-1, None] + np.diff(x)[:, None] * np.linspace(0, 1, 9)[None, :]).ravel()
    return np.concatenate([x, between, [x[0] - 1, x[-1] + 1, -1e300, 1e300]])


@settings(max_examples=100, deadline=None)
@given(monotone_knots())
def test_max_knots_error_is_reported_exactly_and_bounded(case):
    x, y, k = case
    cal = registry.get("isotonic").__new__(registry.get("isotonic"))
    cal.x_, cal.y_, cal.name = x, y, "isotonic"
    out = export.simplify(cal, k)
    small = out.calibrator
    assert out.after == small.x_.size <= k and out.before == x.size
    assert np.isin(small.x_, x).all() and small.x_[0] == x[0] and small.x_[-1] == x[-1]
    d = np.diff(small.y_)
    assert (d >= 0).all() or (d <= 0).all()  # monotone as the map
    grid = _dense_grid(x)
    deviation = np.max(np.abs(np.interp(grid, small.x_, small.y_) - np.interp(grid, x, y)))
    at_knots = max(abs(float(np.interp(xk, small.x_, small.y_)) - yk) for xk, yk in zip(x, y))
    assert abs(deviation - out.max_error) <= 1e-12
    assert deviation <= at_knots + 1e-12
    if k == x.size:
        assert out.max_error == 0.0 and small is cal


def _best_bins_error(v: np.ndarray, groups: int) -> float:
    """Brute force: the smallest max error of `groups` runs of adjacent bins (dynamic program)."""
    m = v.size
    best = np.full((groups + 1, m + 1), np.inf)
    best[0, 0] = 0.0
    for g in range(1, groups + 1):
        for j in range(1, m + 1):
            best[g, j] = min(max(best[g - 1, i], 0.5 * (v[i:j].max() - v[i:j].min())) for i in range(j))
    return float(best[:, m].min())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=3, max_size=14), st.integers(2, 14), st.booleans())
def test_max_knots_on_bins_is_optimal(values, k, monotone):
    v = np.sort(values) if monotone else np.array(values)
    edges = np.linspace(0.0, 1.0, v.size + 1)[1:-1]
    cal = registry.get("binning").__new__(registry.get("binning"))
    cal.edges_, cal.values_, cal.name = edges, v, "binning"
    out = export.simplify(cal, k)
    small = out.calibrator
    assert small.edges_.size <= max(k, 0) and np.isin(small.edges_, edges).all()
    grid = np.concatenate([edges, edges + 1e-9, edges - 1e-9, [-5.0, 0.0, 1.0, 5.0]])
    got = small.values_[np.searchsorted(small.edges_, grid, side="left")]
    want = v[np.searchsorted(edges, grid, side="left")]
    assert abs(np.max(np.abs(got - want)) - out.max_error) <= 1e-12
    if monotone:
        assert (np.diff(small.values_) >= 0).all()
    if v.size - 1 > k:
        optimum = _best_bins_error(v, k + 1)
        assert optimum - 1e-12 <= out.max_error <= optimum * (1 + 1e-3) + 1e-12


def test_max_knots_cli_reports_the_error_and_the_sql_is_the_simplified_map(tmp_path):
    rng = np.random.default_rng(4)
    x = np.unique(rng.uniform(0, 1, 3000))
    y = np.sort(rng.uniform(0, 1, x.size))
    path = tmp_path / "big.json"
    maps.save_map(registry.get("isotonic").from_state({}, {"x": x, "y": y}), str(path))
    result = runner.invoke(app, ["export", str(path), "--sql", "--max-knots", "40"])
    assert result.exit_code == 0, result.output
    line, = result.stderr.strip().splitlines()
    assert line.startswith(f"simplified {x.size} knots to ")
    reported = float(line.rsplit(" ", 1)[1])
    s = np.concatenate([x, rng.uniform(-0.1, 1.1, 5000)])
    got = run_duckdb(result.stdout.strip(), s)
    assert abs(np.max(np.abs(got - np.interp(s, x, y))) - reported) <= 1e-12
    assert 0 < reported < 0.1


def test_large_exports_warn_and_strict_refuses(tmp_path):
    x = np.linspace(0, 1, export.WARN_KNOTS + 1)
    path = tmp_path / "huge.json"
    maps.save_map(registry.get("isotonic").from_state({}, {"x": x, "y": x}), str(path))
    result = runner.invoke(app, ["export", str(path), "--sql"])
    assert result.exit_code == 0 and result.stdout.startswith("CASE")
    line, = result.stderr.strip().splitlines()
    assert line.startswith("warning: the SQL is ") and "--max-knots" in line
    result = runner.invoke(app, ["--strict", "export", str(path), "--sql"])
    assert result.exit_code == 2 and result.stdout == ""
    result = runner.invoke(app, ["export", str(path), "--sql", "--max-knots", "1000"])
    assert result.exit_code == 0 and "warning" not in result.stderr


def test_case_tree_is_balanced():
    """A map of n knots nests CASE about log2(n) deep, so a row costs that many comparisons."""
    x = np.linspace(0, 1, 4096)
    sql = export.sql_expression(registry.get("isotonic").from_state({}, {"x": x, "y": x}))
    depth = peak = 0
    for token in sql.split():
        if token == "CASE":
            depth += 1
            peak = max(peak, depth)
        elif token == "END":
            depth -= 1
    assert depth == 0 and peak <= 14


def test_venn_abers_ties_and_cvap_refusal(tmp_path):
    """At a calibration score the IVAP point prediction has its own value (p0's right step,
    p1's left step); the floats either side get the neighbouring steps. CVAP is refused."""
    cal = registry.get("venn-abers")().fit(np.array([0.1, 0.2, 0.2, 0.3]), np.array([0.0, 1.0, 0.0, 1.0]))
    c = np.array([0.1, 0.2, 0.3])
    scores = np.concatenate([c, np.nextafter(c, -1), np.nextafter(c, 2), [-1.0, 5.0]])
    got = run_duckdb(export.sql_expression(cal), scores)
    assert np.array_equal(got, cal.predict(scores))
    cvap = registry.get("venn-abers")(variant="cvap", folds=2).fit(np.linspace(0, 1, 20), np.arange(20) % 2)
    assert not export.supports_sql(cvap)
    with pytest.raises(Exception, match="a cvap venn-abers map cannot be exported as SQL"):
        export.sql_expression(cvap)
