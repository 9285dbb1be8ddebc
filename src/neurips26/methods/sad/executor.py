"""The enumerated statement space and its batched, vectorised execution.

One DeepCoder step assigns the next variable ``op [lambda] args``. Over the ten variable slots the
statement space is finite: ``CANDIDATES`` enumerates it (1,070 right-hand sides). A batch of program
states is held as padded arrays, and any set of (state, candidate) rows executes over all examples at
once: one numpy kernel per operation, lambdas applied through precomputed lookup tables over
``[-50, 50]``. The interpreter in :mod:`.dsl` is the reference; the tests check the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neurips26.methods.sad import dsl

L = dsl.MAX_LIST_LENGTH
V = dsl.MAX_VARIABLES
OFFSET = -dsl.MIN_INT  # value + OFFSET indexes the lambda tables
KIND_ABSENT, KIND_INT, KIND_LIST = 0, 1, 2
_KIND = {dsl.INT: KIND_INT, dsl.LIST: KIND_LIST}
_BIG = 10_000


@dataclass(frozen=True)
class CandidateSpace:
    """Every statement right-hand side over ``V`` variable slots, in a fixed order.

    Attributes (all of length ``C``): ``function`` (index into ``functions``, an (op, lambda) pair),
    ``op`` (index into ``dsl.OPERATIONS``), ``lam`` (index into ``dsl.LAMBDAS`` or -1), ``arg0``/``arg1``
    (variable slots, -1 when absent), ``kind0``/``kind1`` (the kind each argument needs).
    """

    functions: tuple[tuple[dsl.Operation, dsl.Lambda | None], ...]
    function: np.ndarray
    op: np.ndarray
    lam: np.ndarray
    arg0: np.ndarray
    arg1: np.ndarray
    kind0: np.ndarray
    kind1: np.ndarray
    returns: np.ndarray

    def __len__(self) -> int:
        return len(self.function)

    def statement(self, index: int, variable: str) -> dsl.Statement:
        """The :class:`dsl.Statement` ``variable = candidate[index]``."""
        op, lam = self.functions[self.function[index]]
        args = tuple(f"x{a}" for a in (self.arg0[index], self.arg1[index]) if a >= 0)
        return dsl.Statement(variable, op, lam, args)

    def index_of(self, statement: dsl.Statement) -> int:
        """The candidate index of a statement's right-hand side (the inverse of :meth:`statement`)."""
        return self._lookup[
            (statement.op.token, statement.lam.token if statement.lam else "", statement.args)
        ]

    @property
    def _lookup(self) -> dict[tuple[str, str, tuple[str, ...]], int]:
        cached = self.__dict__.get("_lookup_cache")
        if cached is None:
            cached = {}
            for i in range(len(self)):
                s = self.statement(i, "x_")
                cached[(s.op.token, s.lam.token if s.lam else "", s.args)] = i
            object.__setattr__(self, "_lookup_cache", cached)
        return cached

    def type_mask(self, kinds: np.ndarray) -> np.ndarray:
        """``[B, C]`` bool: the candidate's arguments exist in the state with the right kinds.

        ``kinds`` is ``[B, V]`` (0 absent, 1 int, 2 list).
        """
        kinds = np.asarray(kinds)
        ok0 = np.take(kinds, self.arg0, axis=1) == self.kind0
        ok1 = np.where(self.arg1 >= 0, np.take(kinds, np.maximum(self.arg1, 0), axis=1) == self.kind1, True)
        return ok0 & ok1


def build_candidate_space(num_variables: int = V) -> CandidateSpace:
    """Enumerate ``op × lambda × argument slots`` (``Take``-like ops need two distinct slots)."""
    functions: list[tuple[dsl.Operation, dsl.Lambda | None]] = []
    rows: list[tuple[int, int, int, int, int, int, int, int]] = []
    for op_index, op in enumerate(dsl.OPERATIONS):
        for lam in op.lambdas() or (None,):
            f = len(functions)
            functions.append((op, lam))
            lam_index = dsl.LAMBDAS.index(lam) if lam else -1
            kinds = [_KIND[t] for t in op.arg_types]
            ret = _KIND[op.returns]
            if len(kinds) == 1:
                for a in range(num_variables):
                    rows.append((f, op_index, lam_index, a, -1, kinds[0], 0, ret))
            else:
                for a in range(num_variables):
                    for b in range(num_variables):
                        if kinds[0] != kinds[1] and a == b:
                            continue
                        rows.append((f, op_index, lam_index, a, b, kinds[0], kinds[1], ret))
    table = np.asarray(rows, dtype=np.int64)
    return CandidateSpace(tuple(functions), *(table[:, i].copy() for i in range(8)))


CANDIDATES = build_candidate_space()

_INTS = np.arange(dsl.MIN_INT, dsl.MAX_INT + 1)
UNARY_TABLE = np.zeros((len(dsl.LAMBDAS), len(_INTS)), dtype=np.int64)
BINARY_TABLE = np.zeros((len(dsl.LAMBDAS), len(_INTS), len(_INTS)), dtype=np.int64)
for _i, _lam in enumerate(dsl.LAMBDAS):
    if _lam.arity == 1:
        UNARY_TABLE[_i] = [int(_lam.func(int(x))) for x in _INTS]
    else:
        BINARY_TABLE[_i] = [[int(_lam.func(int(x), int(y))) for y in _INTS] for x in _INTS]
UNARY_PRED = np.zeros((len(dsl.LAMBDAS), len(_INTS)), dtype=bool)
for _i, _lam in enumerate(dsl.LAMBDAS):
    if _lam.arity == 1 and _lam.returns == "bool":
        UNARY_PRED[_i] = [bool(_lam.func(int(x))) for x in _INTS]


@dataclass
class StateBatch:
    """``B`` program states over ``E`` examples: ``values [B, E, V, L]`` (zero padded), ``lengths
    [B, E, V]`` (list lengths; 0 for ints), ``kinds [B, V]`` (0 absent, 1 int, 2 list)."""

    values: np.ndarray
    lengths: np.ndarray
    kinds: np.ndarray

    @property
    def num_examples(self) -> int:
        return self.values.shape[1]

    def num_variables(self) -> np.ndarray:
        """``[B]``: how many slots are filled (variables are filled in order x0, x1, ...)."""
        return (self.kinds != KIND_ABSENT).sum(axis=1)

    def value(self, b: int, e: int, v: int) -> dsl.Value:
        """The python value of variable ``v`` on example ``e`` of state ``b``."""
        if self.kinds[b, v] == KIND_INT:
            return int(self.values[b, e, v, 0])
        if self.kinds[b, v] == KIND_LIST:
            return tuple(int(x) for x in self.values[b, e, v, : self.lengths[b, e, v]])
        raise ValueError(f"variable x{v} is absent in state {b}")

    def take(self, index: np.ndarray) -> StateBatch:
        return StateBatch(self.values[index].copy(), self.lengths[index].copy(), self.kinds[index].copy())


def encode_values(value_rows: list[list[dsl.Value]]) -> tuple[np.ndarray, np.ndarray, int]:
    """Encode one variable's values over examples: ``(values [E, L], lengths [E], kind)``."""
    kind = _KIND[dsl.value_type(value_rows[0])]
    values = np.zeros((len(value_rows), L), dtype=np.int64)
    lengths = np.zeros(len(value_rows), dtype=np.int64)
    for e, v in enumerate(value_rows):
        if _KIND[dsl.value_type(v)] != kind:
            raise TypeError(f"a variable must have one type on every example, got {value_rows}")
        if kind == KIND_INT:
            values[e, 0] = v
        else:
            if len(v) > L:
                raise ValueError(f"list {v} is longer than {L}")
            values[e, : len(v)] = v
            lengths[e] = len(v)
    return values, lengths, kind


def make_states(examples: list[list[list[dsl.Value]]]) -> StateBatch:
    """Build a batch from ``examples[b][e] = [x0, x1, ...]`` (every state's variables per example)."""
    if not examples:
        raise ValueError("examples must hold at least one state")
    num_examples = len(examples[0])
    values = np.zeros((len(examples), num_examples, V, L), dtype=np.int64)
    lengths = np.zeros((len(examples), num_examples, V), dtype=np.int64)
    kinds = np.zeros((len(examples), V), dtype=np.int64)
    for b, state in enumerate(examples):
        if len(state) != num_examples:
            raise ValueError(f"every state needs {num_examples} examples, state {b} has {len(state)}")
        counts = {len(row) for row in state}
        if len(counts) != 1:
            raise ValueError(f"state {b}: examples have different numbers of variables {sorted(counts)}")
        for v in range(counts.pop()):
            vals, lens, kind = encode_values([row[v] for row in state])
            values[b, :, v], lengths[b, :, v], kinds[b, v] = vals, lens, kind
    return StateBatch(values, lengths, kinds)


@dataclass
class Results:
    """Results of executed rows: ``values [N, E, L]``, ``lengths [N, E]``, ``kind [N]``, ``ok [N, E]``."""

    values: np.ndarray
    lengths: np.ndarray
    kind: np.ndarray
    ok: np.ndarray


def _in_range(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return (((x >= dsl.MIN_INT) & (x <= dsl.MAX_INT)) | ~mask).all(axis=-1)


def execute(
    states: StateBatch, state_index: np.ndarray, candidate: np.ndarray, space: CandidateSpace = CANDIDATES
) -> Results:
    """Execute candidate ``candidate[n]`` on state ``state_index[n]`` over all examples, vectorised.

    Rows whose arguments are absent or mistyped come back with ``ok`` False everywhere.
    """
    state_index = np.asarray(state_index, dtype=np.int64)
    candidate = np.asarray(candidate, dtype=np.int64)
    if state_index.shape != candidate.shape or state_index.ndim != 1:
        raise ValueError(
            f"state_index and candidate must be 1-D of one length, got {state_index.shape}, {candidate.shape}"
        )
    n_rows, n_ex = len(candidate), states.num_examples
    a0, a1 = space.arg0[candidate], np.maximum(space.arg1[candidate], 0)
    x = states.values[state_index, :, a0]  # [N, E, L]
    nx = states.lengths[state_index, :, a0]  # [N, E]
    y = states.values[state_index, :, a1]
    ny = states.lengths[state_index, :, a1]
    row_kinds = states.kinds[state_index]
    typed = row_kinds[np.arange(n_rows), a0] == space.kind0[candidate]
    typed &= (space.arg1[candidate] < 0) | (row_kinds[np.arange(n_rows), a1] == space.kind1[candidate])
    out = np.zeros((n_rows, n_ex, L), dtype=np.int64)
    out_len = np.zeros((n_rows, n_ex), dtype=np.int64)
    ok = np.zeros((n_rows, n_ex), dtype=bool)
    pos = np.arange(L)
    ops = space.op[candidate]
    lams = np.maximum(space.lam[candidate], 0)
    for op_index in np.unique(ops):
        rows = np.nonzero(ops == op_index)[0]
        token = dsl.OPERATIONS[op_index].token
        if token in ("Take", "Drop", "Access"):  # first argument is the int, second the list
            k, xs, n = x[rows, :, 0], y[rows], ny[rows]
        else:
            k, xs, n = None, x[rows], nx[rows]
        mask = pos < n[..., None]
        length = np.zeros_like(n)
        good = np.ones(n.shape, dtype=bool)
        if token in ("Head", "Last", "Minimum", "Maximum", "Sum", "Count", "Access"):
            if token == "Head":
                val = xs[..., 0]
                good = n > 0
            elif token == "Last":
                val = np.take_along_axis(xs, np.maximum(n - 1, 0)[..., None], -1)[..., 0]
                good = n > 0
            elif token == "Minimum":
                val = np.where(mask, xs, _BIG).min(-1)
                good = n > 0
            elif token == "Maximum":
                val = np.where(mask, xs, -_BIG).max(-1)
                good = n > 0
            elif token == "Sum":
                val = (xs * mask).sum(-1)
            elif token == "Count":
                keep = UNARY_PRED[lams[rows][:, None, None], xs + OFFSET] & mask
                val = keep.sum(-1)
            else:  # Access
                good = (k >= 0) & (k < n)
                val = np.take_along_axis(xs, np.clip(k, 0, L - 1)[..., None], -1)[..., 0]
            good = good & (val >= dsl.MIN_INT) & (val <= dsl.MAX_INT)
            result = np.zeros_like(xs)
            result[..., 0] = np.where(good, val, 0)
        else:
            if token == "Reverse":
                result = np.take_along_axis(xs, np.clip(n[..., None] - 1 - pos, 0, L - 1), -1)
                length = n
            elif token == "Sort":
                result = np.sort(np.where(mask, xs, _BIG), axis=-1)
                length = n
            elif token in ("Take", "Drop"):
                cut = np.where(k >= 0, np.minimum(k, n), np.maximum(n + k, 0))  # python slice bound
                if token == "Take":
                    result, length = xs, cut
                else:
                    result = np.take_along_axis(xs, np.clip(cut[..., None] + pos, 0, L - 1), -1)
                    length = n - cut
            elif token == "Map":
                result = UNARY_TABLE[lams[rows][:, None, None], xs + OFFSET]
                length = n
            elif token == "Filter":
                keep = UNARY_PRED[lams[rows][:, None, None], xs + OFFSET] & mask
                order = np.argsort(~keep, axis=-1, kind="stable")
                result = np.take_along_axis(xs, order, -1)
                length = keep.sum(-1)
            elif token == "ZipWith":
                length = np.minimum(n, ny[rows])
                result = BINARY_TABLE[lams[rows][:, None, None], xs + OFFSET, y[rows] + OFFSET]
            elif token == "Scanl1":
                result = xs.copy()
                lam_rows = lams[rows][:, None]
                for j in range(1, L):
                    prev = np.clip(result[..., j - 1], dsl.MIN_INT, dsl.MAX_INT) + OFFSET
                    result[..., j] = BINARY_TABLE[lam_rows, prev, xs[..., j] + OFFSET]
                length = n
            else:  # pragma: no cover
                raise ValueError(f"unhandled operation {token}")
            live = pos < length[..., None]
            good = _in_range(result, live)
            result = np.where(live, result, 0)
        out[rows], out_len[rows], ok[rows] = result, length, good
    ok &= typed[:, None]
    out[~ok] = 0
    out_len[~ok] = 0
    return Results(out, out_len, space.returns[candidate].copy(), ok)


def append_results(states: StateBatch, state_index: np.ndarray, results: Results) -> StateBatch:
    """New states: ``states[state_index[n]]`` plus result ``n`` in its next free variable slot."""
    new = states.take(np.asarray(state_index))
    slot = new.num_variables()
    if (slot >= V).any():
        raise ValueError(f"a state already holds all {V} variables")
    rows = np.arange(len(slot))
    new.values[rows, :, slot] = results.values
    new.lengths[rows, :, slot] = results.lengths
    new.kinds[rows, slot] = results.kind
    return new


def equals_target(
    results: Results, target_values: np.ndarray, target_lengths: np.ndarray, target_kind: np.ndarray
) -> np.ndarray:
    """``[N]`` bool: result ``n`` is defined on all examples and equals the target ``[N, E, L]``."""
    same = (results.values == target_values).all(-1) & (results.lengths == target_lengths)
    return results.ok.all(-1) & same.all(-1) & (results.kind == target_kind)


def redundant(states: StateBatch, state_index: np.ndarray, results: Results) -> np.ndarray:
    """``[N]`` bool: the result equals an existing variable of its state on every example."""
    vals = states.values[state_index]  # [N, E, V, L]
    lens = states.lengths[state_index]
    kinds = states.kinds[state_index]  # [N, V]
    same = (vals == results.values[:, :, None, :]).all(-1) & (lens == results.lengths[:, :, None])
    return (same.all(1) & (kinds == results.kind[:, None])).any(-1)
