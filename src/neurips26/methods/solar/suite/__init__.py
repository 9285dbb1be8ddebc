"""SOLAR: AI-Powered Speed-of-Light Performance Analysis — the authored program suite.

Small CPU-sized programs in KernelBench form (an ``nn.Module`` ``Model``, ``get_inputs()``,
``get_init_inputs()``), each with a hand-written MAC formula (exact iteration domains: causal attention is a
triangle, padded convolution taps that read zeros are not counted). ``solexecbench`` reuses them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from neurips26.methods.solar.suite import blocks, models, ops, robotics


@dataclass(frozen=True)
class SuiteProgram:
    """One program: ``model_cls(*init_inputs)`` called on ``get_inputs()``; ``hand_macs`` is the formula."""

    name: str
    level: str
    model_cls: type[torch.nn.Module]
    init_inputs: tuple[Any, ...]
    get_inputs: Callable[[], list[Any]]
    hand_macs: int

    def build(self, device: str = "cpu", seed: int = 0) -> tuple[torch.nn.Module, list[Any]]:
        torch.manual_seed(seed)
        with torch.device(device):
            model = self.model_cls(*self.init_inputs).eval()
        torch.manual_seed(seed + 1)
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in self.get_inputs()]
        return model, inputs


def _collect() -> list[SuiteProgram]:
    programs = []
    for level, module in (("L1", ops), ("L2", blocks), ("L3", models), ("robotics", robotics)):
        for entry in module.PROGRAMS:
            programs.append(
                SuiteProgram(
                    entry["name"],
                    level,
                    entry["model"],
                    tuple(entry.get("init", ())),
                    entry["inputs"],
                    int(entry["macs"]),
                )
            )
    return programs


PROGRAMS: list[SuiteProgram] = _collect()


def get_program(name: str) -> SuiteProgram:
    for program in PROGRAMS:
        if program.name == name:
            return program
    raise ValueError(f"unknown suite program {name!r}; known: {[p.name for p in PROGRAMS]}")


__all__ = ["PROGRAMS", "SuiteProgram", "get_program"]
