"""The `calib` command: parses arguments, calls the library (`fit`, `apply`, `evaluation`, ...), prints results.

Exit codes: 0 success; 1 an `evaluate` gate failed; 2 usage, input, map or fit error.
Data goes to stdout; messages, tables of diagnostics and progress go to stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from typing import Annotated, Optional

import typer

# The calibrators' matrix products are small, so BLAS threads only contend (docs/algorithms.md,
# "calib fit end to end"). Set before numpy is first imported; users may override.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# Arrow buffers from the C allocator, so pages a table frees are the ones numpy's arrays reuse
# next (docs/algorithms.md, "calib fit end to end"). Set before pyarrow is first imported.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")

from calibcli.io import console  # noqa: E402
from calibcli._version import __version__  # noqa: E402
from calibcli.cli import apply, evaluate, fit  # noqa: E402
from calibcli.cli.shared import state  # noqa: E402
from calibcli.errors import CalibWarning, ExitCode  # noqa: E402


_GLOBAL_FLAGS = ("-q", "--quiet", "--debug", "--strict")


class _Group(typer.core.TyperGroup):
    """Accepts the global flags (-q, --debug, --strict) after the subcommand too:
    `calib fit x.csv --strict` means `calib --strict fit x.csv`."""

    def parse_args(self, ctx, args):
        if "--" in args:
            head, tail = args[:args.index("--")], args[args.index("--"):]
        else:
            head, tail = args, []
        flags = [a for a in head if a in _GLOBAL_FLAGS]
        rest = [a for a in head if a not in _GLOBAL_FLAGS]
        return super().parse_args(ctx, flags + rest + tail)


app = typer.Typer(
    cls=_Group,
    name="calib",
    help="Turn a classifier's raw scores into probabilities people can trust.\n\n"
    "Exit codes: 0 success, 1 an evaluate gate failed, 2 usage/input/map/fit error.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"calib {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Hide warnings and summaries (errors still show).")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show the traceback of unexpected errors.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Treat warnings (non-converged fit, clipped scores, all-equal scores) as errors: exit 2, no output.")] = False,
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")] = None,
) -> None:
    console.quiet = quiet
    state["debug"] = debug
    state["strict"] = strict


app.command(cls=fit.FitCommand)(fit.fit)
app.command()(fit.summarize)
app.command()(apply.apply)
app.command()(evaluate.evaluate)
app.command()(apply.export)
app.command()(evaluate.compare)
app.command()(fit.methods)


class _NoPandas:
    """An import hook under which `import pandas` fails, as if pandas were not installed."""

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r} (not used by the calib command)")
        return None


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A Python warning that reaches the command (from a library underneath) as one `warning:`
    line on stderr, hidden by -q, never the raw two-line form with a source line."""
    text = str(message) if issubclass(category, CalibWarning) else f"{category.__name__}: {message}"
    console.warn(text)


def main() -> None:
    """Console-script entry point.

    Exits with `os._exit` after flushing, so that native threads still parked in pyarrow
    after an error cannot abort the process during interpreter teardown.
    """
    from calibcli.io import targets

    # pyarrow imports pandas, when installed, the first time it builds any array; the CLI
    # never gives pyarrow pandas objects, so it tells pyarrow there is none (start-up time).
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _NoPandas())
    targets.install_signal_cleanup()
    warnings.showwarning = _show_warning
    if sys.stdout is None or sys.stderr is None:  # started with fd 1 or 2 closed (`>&-`): nobody reads it,
        null = open(os.devnull, "w", encoding="utf-8")  # as after a broken pipe
        sys.stdout, sys.stderr = sys.stdout or null, sys.stderr or null
    for stream in (sys.stdout, sys.stderr):  # an ASCII or Latin-1 terminal gets escapes, not a crash
        with contextlib.suppress(AttributeError, ValueError, OSError):  # a replaced or closed stream
            stream.reconfigure(errors="backslashreplace")
    try:
        app()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else ExitCode.ERROR)
    plotting = sys.modules.get("calibcli.evaluation.render.plot")
    if plotting is not None:
        plotting.release()  # os._exit below skips atexit
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            continue  # the reader is gone: nothing left to tell it
        except OSError as exc:
            if stream is sys.stdout:
                console.error(f"<stdout>: cannot write ({exc.strerror})")
                code = code or ExitCode.ERROR
    os._exit(int(code))
