"""SEM-FAS's own configuration; every default says where it comes from."""

from __future__ import annotations

from dataclasses import dataclass

from neurips26.core.config import param
from neurips26.core.validation import check_in_range, check_int, check_positive


@dataclass
class SEMFASConfig:
    """Architecture and training of :class:`~neurips26.methods.semfas.SEMFAS`.

    The abstract fixes the ingredients (complex modality states, coherent heads mixed into a density
    matrix, a constrained POVM-like head with an exact decomposition, three sampling-free uncertainties);
    every number below is ours.
    """

    dim: int = param(32, "issue: dim=32 (the state space C^d)")
    heads: int = param(4, "issue: heads=4 coherent heads mixed into rho")
    povm_rank: int = param(8, "ours: rank of each A_c; 2 x 8 < 32 leaves a coverage subspace")
    temperature: float = param(1.0, "paper: p = P normalised 'with temperature'; refit on source val")
    use_phase: bool = param(True, "paper: complex states and relative phases (False: real ablation)")
    use_coverage: bool = param(True, "paper: coverage element E_perp = I - sum_c E_c (False: complete POVM)")
    coverage_weight: float = param(0.1, "ours: weight of the coverage-mass regulariser Tr(rho E_perp)")
    modality_dropout: float = param(0.3, "ours: per-sample drop rate of each modality while training")
    hidden: int = param(32, "ours: width of the per-modality MLP encoders of the experiment")
    encoder_dropout: float = param(0.1, "ours: dropout in the encoders (also MC-dropout's rate)")
    lr: float = param(0.01, "ours: Adam rate that trains every system stably on the sensor data")
    weight_decay: float = param(1e-4, "ours: light L2 on every system")
    epochs: int = param(20, "ours: the tiny heads converge within 20 epochs on ~1k samples")
    batch_size: int = param(256, "ours: few optimiser steps keep the default profile within its CPU budget")
    seed: int = param(0, "ours: seeds the initial weights and the modality dropout")

    def __post_init__(self) -> None:
        check_int("dim", self.dim, minimum=2)
        check_int("heads", self.heads, minimum=1)
        check_int("povm_rank", self.povm_rank, minimum=1)
        check_int("hidden", self.hidden, minimum=1)
        check_int("epochs", self.epochs, minimum=1)
        check_int("batch_size", self.batch_size, minimum=1)
        check_int("seed", self.seed, minimum=0)
        check_positive("temperature", self.temperature)
        check_positive("coverage_weight", self.coverage_weight, allow_zero=True)
        check_positive("lr", self.lr)
        check_positive("weight_decay", self.weight_decay, allow_zero=True)
        check_in_range("modality_dropout", self.modality_dropout, 0.0, 0.95)
        check_in_range("encoder_dropout", self.encoder_dropout, 0.0, 0.95)
        if self.povm_rank > self.dim:
            raise ValueError(f"povm_rank must be <= dim ({self.dim}), got {self.povm_rank}")
