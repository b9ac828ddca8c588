"""The multicalibration states of several predictions over the same rows (`calib evaluate` with
several `--prob-col`s or maps, an engine's partition): the rows' segment columns are kept once,
shared by the states, and each prediction adds its own p, labels and weights.

`SegmentStates(count, kinds)`: `add(ys, ps, columns, sample_weight)` per batch (one y and one p
per prediction, the same rows), `merge(parts)` across partitions (in their order: the rows of
the merged states are those of the parts one after the other, as one file of them would give),
`results(options)` one `MulticalResult` per prediction. States pickle (the shared columns once).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from calibcli.evaluation.metrics.multicalibration import MulticalOptions, MulticalResult, MulticalState


class SegmentStates:
    """One `MulticalState` per prediction; the first holds the segment columns, the others share them."""

    def __init__(self, count: int, kinds: Mapping[str, str] | None = None) -> None:
        self.kinds = dict(kinds or {})
        self.states = [MulticalState(self.kinds) for _ in range(count)]

    @property
    def rows(self) -> int:
        return self.states[0].rows if self.states else 0

    def add(self, ys: Sequence[Any], ps: Sequence[Any], columns: Mapping[str, Any],
            sample_weight: Any = None) -> None:
        """One batch: `ys[i]` and `ps[i]` the labels and p of prediction i, `columns` the segment
        columns of the same rows."""
        first, *rest = self.states
        first.add(ys[0], ps[0], columns, sample_weight)
        for state, y, p in zip(rest, ys[1:], ps[1:]):
            state._columns = first._columns
            state.add_rows(y, p, sample_weight)

    @classmethod
    def merge(cls, parts: Sequence[SegmentStates]) -> SegmentStates:
        """The parts' rows one after the other (the columns re-coded once, into one store)."""
        parts = [p for p in parts if p.states]
        out = cls(0, parts[0].kinds if parts else None)
        if not parts:
            return out
        first = MulticalState.merge([p.states[0] for p in parts])
        out.states = [first]
        for i in range(1, len(parts[0].states)):
            state = MulticalState(out.kinds)
            for part in parts:
                s = part.states[i]
                state._p += s._p
                state._y += s._y
                state._w += s._w
                state.rows += s.rows
            state._columns = first._columns
            out.states.append(state)
        return out

    @property
    def nbytes(self) -> int:
        """Bytes held: the shared columns once, each prediction's rows."""
        if not self.states:
            return 0
        columns = sum(c.nbytes for c in (self.states[0]._columns or {}).values())
        return sum(s.nbytes for s in self.states) - columns * (len(self.states) - 1)

    def results(self, options: MulticalOptions | None = None) -> list[MulticalResult]:
        return [s.result(options) for s in self.states]


__all__ = ["SegmentStates"]
