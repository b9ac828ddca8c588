"""What each command asks the library to do, checked once, at the door.

Every `calib` command and every Python entry point (`calibcli.fit`, `calibcli.evaluate`, the
engines) builds one of these requests; its builder is the only place an option is checked
(against `bounds`, the method's `Param`s in `params`, and the other options it must agree
with), so a bad value is refused with the same message whichever door it came in by. The
library takes a built request and trusts it.

- `fit`: `FitRequest` (binary and K-class fits), `CompareRequest`, `Columns`;
- `use`: `ApplyRequest`, `ExportRequest` (a saved map on files, or as SQL);
- `evaluate`: `EvaluateOptions`;
- `params`: typed method options (`Param`); `bounds`: every numeric option's bounds.

Imports stay light (no numpy, no pyarrow): the CLI builds its request before any library
start-up, and a refused option costs nothing.
"""

from calibcli.requests.bounds import step_option
from calibcli.requests.evaluate import EvaluateOptions, evaluate_output
from calibcli.requests.fit import (Columns, CompareRequest, FitRequest, fit_inputs, param_texts, seed_option,
                                   weight_kind_option)
from calibcli.requests.use import ApplyRequest, ExportRequest, check_expression

__all__ = ["ApplyRequest", "Columns", "CompareRequest", "EvaluateOptions", "ExportRequest", "FitRequest",
           "check_expression", "evaluate_output", "fit_inputs", "param_texts", "seed_option", "step_option",
           "weight_kind_option"]
