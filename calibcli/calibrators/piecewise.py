"""The two map shapes several methods share: `KnotMap` (linear between (score, value) knots,
constant outside: isotonic, ENIR, near-isotonic, Bayes-Iso, boot-isotonic) and `StepMap` (one
value per bin between inner edges: binning, boot-binning), with their saved state."""

from __future__ import annotations

from typing import Any

import numpy as np

from calibcli.numeric import lookup as _lookup
from calibcli.calibrators.base import ScoreCalibrator
from calibcli.calibrators.fitdata import as_float_array
from calibcli.calibrators.statespec import Field, StateSpec
from calibcli.errors import FitError


def interpolate(x_knots: np.ndarray, y_knots: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Linear interpolation between knots, constant outside [x_knots[0], x_knots[-1]].

    Bit-for-bit `np.interp`, through a grid lookup that is faster on large inputs (`_lookup`).
    """
    if x_knots.size == 1:
        return np.full(s.shape, y_knots[0])
    return _lookup.interp(s, x_knots, y_knots)


class KnotMap(ScoreCalibrator):
    """Shared state of knot-based methods: (x, y) knots, linear between, constant outside."""

    def _predict(self, s):
        return interpolate(self.x_, self.y_, s)

    def _get_state(self) -> dict[str, Any]:
        return {"x": self.x_, "y": self.y_}

    state_spec = StateSpec(
        Field("x", order="increasing", min_size=1),
        Field("y", unit=True, order="monotone", same_size="x"),
    )

    def _set_state(self, state: dict[str, Any]) -> None:
        self.x_ = as_float_array(state["x"], "state x")
        self.y_ = as_float_array(state["y"], "state y")
        if self.x_.size == 0 or self.x_.size != self.y_.size:
            raise FitError("state x and y must be non-empty and of the same length")

    def summary(self) -> dict[str, Any]:
        return {"knots": int(self.x_.size)}


class StepMap(ScoreCalibrator):
    """Shared state of bin-based methods: inner edges and one value per bin."""

    edge_side = "left"  # a score equal to an edge belongs to the bin below ("left") or above

    def _predict(self, s):
        return self.values_[np.searchsorted(self.edges_, s, side=self.edge_side)]

    def _get_state(self) -> dict[str, Any]:
        return {"edges": self.edges_, "values": self.values_}

    state_spec = StateSpec(
        Field("edges", order="increasing"),
        # at most n_bins bins (boot-binning: the union of r rounds' bins)
        Field("values", unit=True, min_size=1, max_size=lambda p: p["n_bins"] * p.get("r", 1)),
        check=lambda params, v, fail: len(v["values"]) == len(v["edges"]) + 1 or fail(
            "values", problem=f"has {len(v['values'])} values for {len(v['edges'])} inner edges (needs one more)"),
    )

    def _set_state(self, state: dict[str, Any]) -> None:
        self.edges_ = as_float_array(state["edges"], "state edges")
        self.values_ = as_float_array(state["values"], "state values")
        if self.values_.size != self.edges_.size + 1:
            raise FitError(f"{self.name} state needs one more value than inner edges")

    def summary(self) -> dict[str, Any]:
        return {"bins": int(self.values_.size)}
