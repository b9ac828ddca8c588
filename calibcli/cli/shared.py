"""What every `calib` command shares: the global flags' state, the common argument types, the
bounds in option help, and the wrapper that turns errors into one line and exit code 2."""

from __future__ import annotations

import functools
from typing import Annotated, Callable, Optional

import typer

from calibcli.requests import bounds
from calibcli.io import console
from calibcli.errors import CalibError, ExitCode

state = {"debug": False, "strict": False}  # set by the global flags, before any command runs

InputArg = Annotated[str, typer.Argument(help="Score file (CSV, TSV, JSON lines, Parquet; .gz ok) or - for stdin.")]
FormatOpt = Annotated[Optional[str], typer.Option("--format", "-f", help="Input format: csv, tsv, jsonl, parquet (default: from extension, else sniffed).")]
ScoreCol = Annotated[str, typer.Option("--score-col", help="Column with the classifier's scores.")]
LabelCol = Annotated[str, typer.Option("--label-col", help="Column with 0/1 (or true/false) labels.")]
ScoreColsOpt = Annotated[Optional[str], typer.Option("--score-cols", metavar="SPEC", help="K-class scores: the K columns of one prediction, a comma list (p_cat,p_dog), a quoted shell pattern ('p_*', natural order) or one Parquet list column; instead of --score-col.")]
ClassesOpt = Annotated[Optional[str], typer.Option("--classes", metavar="A,B,...", help="Names of the K classes in the order of --score-cols (default: the columns' suffixes after their common prefix).")]
ScoreKindOpt = Annotated[str, typer.Option("--score-kind", metavar="auto|probability|logit", help="What --score-cols hold: auto (rows of non-negative values summing to 1 within 1e-6 are probabilities, else logits), probability or logit.")]
PosLabelOpt = Annotated[Optional[str], typer.Option("--pos-label", metavar="VALUE", help="Binary labels other than 0/1 (-1/1, yes/no, churn/stay): the label value of the positive class; any one other value is the negative class.")]


def reports_errors(func: Callable) -> Callable:
    """Turn library errors into `error: ...` on stderr and exit code 2, inside each command."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except CalibError as exc:
            console.error(exc.message, exc.hint)
            raise typer.Exit(ExitCode.ERROR) from None
        except BrokenPipeError:
            console.stdout_closed()  # downstream closed the pipe (e.g. `| head`): stop quietly
            raise typer.Exit(ExitCode.OK) from None
        except KeyboardInterrupt:
            raise typer.Exit(130) from None
        except (typer.Exit, typer.Abort):
            raise
        except OSError as exc:  # a failure of the system, not of calib: one line, exit 2
            where = f"{exc.filename}: " if exc.filename else ""
            console.error(f"{where}{exc.strerror or exc}")
            raise typer.Exit(ExitCode.ERROR) from None
        except Exception as exc:  # noqa: BLE001 - last resort: one line, not a traceback
            if state["debug"]:
                raise
            console.error(f"internal error: {type(exc).__name__}: {exc}",
                          "run with `calib --debug ...` for the traceback and report it")
            raise typer.Exit(ExitCode.ERROR) from None

    return wrapper


def command_line(ctx: typer.Context) -> str:
    """The running command as one `calib ...` line: its arguments, then every option whose
    value differs from its default (as the HTML report names what made it)."""
    import shlex

    words = ["calib", ctx.info_name or ""]
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if param.param_type_name == "argument":
            words.append(str(value))
        elif value not in (None, [], ()) and value != param.default and not getattr(param, "hidden", False):
            flag = max(param.opts, key=len)
            if getattr(param, "is_flag", False):
                words.append(flag)
            else:
                words += [w for v in (value if param.multiple else [value]) for w in (flag, str(v))]
    return shlex.join(words)


def option_range(option: str) -> str:
    """The bounds of a numeric option, for its help text."""
    return " Range: " + bounds.OPTIONS[option].describe() + "."
