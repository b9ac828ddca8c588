"""`Columns`: a column named twice among --field-col/--feature-col is refused at the door."""

import pytest
from typer.testing import CliRunner

from calibcli.cli.app import app
from calibcli.errors import UsageError
from calibcli.requests import Columns

runner = CliRunner()


@pytest.mark.parametrize("fields,features", [(("a",), ("a",)), (("a", "a"), ()), ((), ("b", "c", "b"))])
def test_a_column_named_twice_is_refused(fields, features):
    with pytest.raises(UsageError, match="given more than once"):
        Columns(fields=fields, features=features)


def test_distinct_columns_are_kept_in_order():
    cols = Columns(fields=("p", "d"), features=("c", "x"))
    assert (cols.fields, cols.features) == (("p", "d"), ("c", "x"))


def test_the_cli_refuses_it_in_one_line(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("score,label,c\n0.2,0,a\n0.8,1,b\n")
    res = runner.invoke(app, ["fit", str(path), "--method", "multicalibration", "--field-col", "c",
                              "--feature-col", "c"])
    assert res.exit_code == 2 and "'c' is given more than once" in res.stderr and "Traceback" not in res.output
