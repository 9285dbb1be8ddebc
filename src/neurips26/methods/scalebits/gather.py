"""Runtime-gather channel reordering for the channels no exact fold reaches (``reorder="gather"``).

The folds of :func:`integration.fold_reordering` cover the MLP intermediate channels and the v/o head
dims at no run-time cost. The rest cannot be folded:

* the **input columns** of q/k/v/gate/up read one shared normed hidden state (and the residual stream
  under it), so one layer's column order cannot be pushed into its producer;
* the **output rows** of q/k feed RoPE, which rotates fixed pairs of dims (and Qwen3's per-head q/k norm);
  the rows of o/down write into the residual stream.

For those a layer stores its weight permuted, ``W' = W[rho][:, pi]``, plus the index, and computes
``y = (W' x[pi])[rho^-1]`` -- exact for any input, at the cost of one gather of ``x`` and one of ``y`` per
call and ``n ceil(log2 n)`` stored bits per index (counted by the ledger: ``permutation_in`` /
``permutation_out``). This is GPTQ's ``act_order`` + ``g_idx`` idea applied to both sides. Orders sort
channels by decreasing sensitivity sums (rows and columns of ``s_ij = F_ij (Q_low(W) - W)^2``), so
sensitive weights share tiles.
"""

from __future__ import annotations

import torch
from torch import nn

from neurips26.methods.scalebits.core import index_bits, replace_module


class GatherLinear(nn.Linear):
    """``nn.Linear`` whose weight is stored permuted: ``y = (W' x[input_order])[argsort(output_order)]``.

    ``W' = W[output_order][:, input_order]`` (and ``bias[output_order]``); ``None`` leaves that side in
    place. The full-precision outputs equal the original layer's.
    """

    input_order: torch.Tensor | None
    output_order: torch.Tensor | None

    @classmethod
    def from_linear(
        cls, linear: nn.Linear, input_order: torch.Tensor | None, output_order: torch.Tensor | None
    ) -> GatherLinear:
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None)
        rows = output_order if output_order is not None else torch.arange(linear.out_features)
        cols = input_order if input_order is not None else torch.arange(linear.in_features)
        with torch.no_grad():
            layer.weight.copy_(linear.weight[rows][:, cols])
            if linear.bias is not None:
                layer.bias.copy_(linear.bias[rows])
        layer.register_buffer("input_order", None if input_order is None else input_order.long().clone())
        layer.register_buffer("output_order", None if output_order is None else output_order.long().clone())
        return layer.to(linear.weight.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gathered_linear(x, self.weight, self.bias, self.input_order, self.output_order)

    def permutation_lengths(self) -> tuple[int, int]:
        """Lengths of the stored input and output indices (0 for a side left in place)."""
        return permutation_lengths(self)


def gathered_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    input_order: torch.Tensor | None,
    output_order: torch.Tensor | None,
) -> torch.Tensor:
    """``(W' x[input_order] + b')[argsort(output_order)]``: the original layer's output."""
    if input_order is not None:
        x = x.index_select(-1, input_order)
    y = nn.functional.linear(x, weight, bias)
    if output_order is not None:
        y = y.index_select(-1, torch.argsort(output_order))
    return y


def permutation_lengths(layer: nn.Module) -> tuple[int, int]:
    """``(len(input_order), len(output_order))`` of a layer, 0 where it has none (any module)."""
    orders = (getattr(layer, "input_order", None), getattr(layer, "output_order", None))
    return tuple(0 if order is None else order.numel() for order in orders)  # type: ignore[return-value]


def permutation_bits(layer: nn.Module) -> int:
    """Stored bits of a layer's gather indices, ``n ceil(log2 n)`` per index."""
    return sum(n * index_bits(n) for n in permutation_lengths(layer))


def gather_orders(
    linears: dict[str, nn.Linear], sensitivity: dict[str, torch.Tensor], folded: dict[str, set[str]]
) -> dict[str, tuple[torch.Tensor | None, torch.Tensor | None]]:
    """Input and output orders of every layer side no fold has reordered (``folded[name]`` holds
    ``"in"`` / ``"out"`` for the sides a fold already permuted): decreasing column / row sensitivity sums.
    """
    orders = {}
    for name in linears:
        score = sensitivity[name]
        input_order = None if "in" in folded.get(name, set()) else score.sum(0).argsort(descending=True)
        output_order = None if "out" in folded.get(name, set()) else score.sum(1).argsort(descending=True)
        orders[name] = (input_order, output_order)
    return orders


def apply_gathers(
    model: nn.Module,
    linears: dict[str, nn.Linear],
    sensitivity: dict[str, torch.Tensor],
    folded: dict[str, set[str]],
) -> dict[str, nn.Linear]:
    """Swap every selected layer for a :class:`GatherLinear` with its orders (in place); permute
    ``sensitivity`` alike. Returns the new ``{name: layer}``."""

    gathered = {}
    for name, (input_order, output_order) in gather_orders(linears, sensitivity, folded).items():
        layer = GatherLinear.from_linear(linears[name], input_order, output_order)
        replace_module(model, name, layer)
        gathered[name] = layer
        score = sensitivity[name]
        if output_order is not None:
            score = score[output_order]
        if input_order is not None:
            score = score[:, input_order]
        sensitivity[name] = score
    return gathered
