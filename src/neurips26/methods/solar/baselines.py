"""SOLAR: AI-Powered Speed-of-Light Performance Analysis — baselines.

* :func:`flop_counter_flops` — **library adapter** to ``torch.utils.flop_counter.FlopCounterMode`` (PyTorch
  core), run on CPU tensors or on ``meta`` tensors. Its FLOP-only roofline is ``flops / peak``.
* :func:`naive_roofline_seconds` — **re-implemented** per-op roofline in the style of LLM-Viewer / PyTorch's
  ``RuntimeEstimator`` (which is CUDA-only): every non-view ATen op costs ``max(flops / peak, bytes / BW)``
  with FlopCounterMode's per-op formulas and every tensor argument and output read/written in full.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from neurips26.methods.solar.frontend_torch import call_program, module_state
from neurips26.methods.solar.hardware import HardwareSpec
from neurips26.methods.solar.ir import dtype_name


def _on_device(
    program: Callable[..., Any],
    inputs: Sequence[Any],
    device: str,
) -> tuple[tuple[Any, ...], dict[str, torch.Tensor]]:
    moved = tree_map(lambda x: x.detach().to(device) if isinstance(x, torch.Tensor) else x, tuple(inputs))
    state = (
        {k: v.detach().to(device) for k, v in module_state(program).items()}
        if isinstance(program, torch.nn.Module)
        else {}
    )
    return moved, state


def flop_counter_flops(program: Callable[..., Any], inputs: Sequence[Any], device: str = "meta") -> int:
    """Total FLOPs FlopCounterMode reports for one call on ``device`` (``"cpu"`` or ``"meta"``)."""
    moved, state = _on_device(program, inputs, device)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        call_program(program, moved, state)
    return int(counter.get_total_flops())


class _PerOpRoofline(TorchDispatchMode):
    def __init__(self, hw: HardwareSpec) -> None:
        super().__init__()
        self.hw = hw
        self.seconds = 0.0
        self.flops = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        returns = func._schema.returns
        if returns and all(r.alias_info is not None and not r.alias_info.is_write for r in returns):
            return out  # views move nothing
        tensors = [t for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, torch.Tensor)]
        nbytes = sum(t.numel() * t.element_size() for t in tensors)
        flops = 0
        packet = func._overloadpacket
        if packet in flop_registry:
            flops = int(flop_registry[packet](*args, **kwargs, out_val=out))
        dtype = next((dtype_name(t.dtype) for t in tensors if t.dtype.is_floating_point), "float32")
        self.flops += flops
        self.seconds += max(flops / self.hw.flops_rate(dtype), nbytes / self.hw.dram_bandwidth_Bps)
        return out


def naive_roofline_seconds(
    program: Callable[..., Any], inputs: Sequence[Any], hw: HardwareSpec, device: str = "meta"
) -> tuple[float, int]:
    """Per-op unfused roofline time and FLOPs (re-implemented baseline; see the module docstring)."""
    moved, state = _on_device(program, inputs, device)
    mode = _PerOpRoofline(hw)
    with torch.no_grad(), mode:
        call_program(program, moved, state)
    return mode.seconds, mode.flops


class _CallableModule(torch.nn.Module):
    """Wraps a plain function so module-only tools (fvcore's jit tracer) accept it."""

    def __init__(self, function: Callable[..., Any]) -> None:
        super().__init__()
        self.function = function

    def forward(self, *inputs: Any) -> Any:
        return self.function(*inputs)


def fvcore_flops(program: Callable[..., Any], inputs: Sequence[Any]) -> int:
    """FLOPs by fvcore's ``FlopCountAnalysis`` (library adapter, jit-trace based).

    fvcore counts one per multiply-add, so its total is doubled to FLOPs. Ops it has no handle for count
    zero (that is the library's behaviour), and a program it cannot trace counts zero as a whole.
    """
    import logging

    from fvcore.nn import FlopCountAnalysis

    logging.getLogger("fvcore").setLevel(logging.ERROR)
    module = program if isinstance(program, torch.nn.Module) else _CallableModule(program)
    analysis = FlopCountAnalysis(module, tuple(inputs))
    analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
    try:
        with torch.no_grad():
            return 2 * int(analysis.total())
    except Exception:  # a tracing failure is the baseline's miss, counted as zero
        return 0
