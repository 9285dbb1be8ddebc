"""Relation features of the synthesizer: how each program variable relates to the target, from tokens.

The scoring synthesizer (:class:`.models.Synthesizer`) must tell, from token sequences, which statement
maps the state to the target. Elementwise equalities and differences between a variable and the target
(``Reverse`` is an anti-diagonal, ``Head`` a corner, ``Map (+1)`` a constant difference) are hard for a
small Transformer to discover from learned absolute positions in minutes of CPU training; these features
hand them over directly. They compare values, they never execute a candidate statement, so which
statement realises a subgoal is still left to the network (execution-matching features would make the
synthesizer near-exact and leave SAD's reward nothing to prefer but the GT subgoal).
"""

from __future__ import annotations

import torch

from neurips26.methods.sad import tokens as tok

NUM_RELATION_FEATURES = 42
_SLOT = 1 + tok.VALUE_TOKENS


def _elements(block: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Element tokens of values laid out as ``[name, '[', e0..e4, ']']`` or ``[name, int, ...]`` in the
    last dimension (at least 7 tokens): ``elements [..., 5]`` (PAD where none), ``valid [..., 5]`` and
    ``is_list [...]``. Malformed blocks give whatever elements they hold, never an error."""
    is_list = block[..., 1] == tok.LBR
    as_int = torch.cat([block[..., 1:2], torch.full_like(block[..., 2:6], tok.PAD)], -1)
    elements = torch.where(is_list[..., None], block[..., 2:7], as_int)
    return elements, elements >= tok.INT0, is_list


def relation_features(state: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Token-level relations between every variable and the target, per example (no execution).

    ``state [N, E, S]`` (fixed 8-token variable slots), ``target [N, E, 1 + TARGET_TOKENS]`` ->
    ``[N, E, V, 42]`` with ``V = S // 8``: the 5x5 element equality pattern (variable element ``k`` equals
    target element ``j``: reversal, prefixes, suffixes, sorting and ``Head``/``Last`` show as fixed
    patterns), both kinds and lengths, the aligned differences ``(y_k - x_k) / 50`` and their signs, and
    the share of target elements found in the variable and vice versa. These describe the subgoal's
    relation to each argument; which statement realises it is still left to the network.
    """
    n, e, s = state.shape
    slots = state[..., : s - s % _SLOT].reshape(n, e, -1, _SLOT)
    x, x_ok, x_list = _elements(slots)  # [N, E, V, 5]
    y, y_ok, y_list = _elements(target)  # [N, E, 5]
    y, y_ok, y_list = y[:, :, None], y_ok[:, :, None], y_list[:, :, None]
    both = x_ok[..., :, None] & y_ok[..., None, :]
    equal = (x[..., :, None] == y[..., None, :]) & both  # [N, E, V, 5, 5]
    x_len = x_ok.sum(-1).float()
    y_len = y_ok.sum(-1).float().expand_as(x_len)
    aligned = x_ok & y_ok
    diff = torch.where(aligned, (y - x).float() / 50.0, torch.zeros_like(x, dtype=torch.float))
    in_x = equal.any(-2).sum(-1).float() / y_len.clamp(min=1)  # target elements found in x
    in_y = equal.any(-1).sum(-1).float() / x_len.clamp(min=1)
    parts = [
        equal.flatten(-2).float(),
        torch.stack(
            [x_list.float(), y_list.float().expand_as(x_len), x_len / 5, y_len / 5, (x_len == y_len).float()],
            -1,
        ),
        diff,
        torch.sign(diff),
        torch.stack([in_x, in_y], -1),
    ]
    return torch.cat(parts, -1)
