"""DACS's own configuration; every default says where it comes from."""

from __future__ import annotations

from dataclasses import dataclass

from neurips26.core.config import param
from neurips26.core.validation import check_choice, check_int, check_positive

RATIO_ESTIMATORS = ("prototype", "density")


@dataclass
class DACSConfig:
    """Architecture, the three stages and training of :class:`~neurips26.methods.dacs.DACSTrainer`.

    The abstract fixes the three stages (adversarial alignment before message passing, layer-wise
    reweighting of propagation, final adversarial alignment); every number here is ours.
    """

    hidden: int = param(64, "ours: width of the encoder, the GCN layers and the discriminators")
    num_layers: int = param(2, "ours: two GCN layers, the usual depth of GDA backbones (UDAGCN, StruRW)")
    dropout: float = param(0.0, "ours: 0 keeps runs deterministic; small graphs do not overfit in 100 epochs")
    lr: float = param(0.01, "ours: Adam's rate that trains every system stably on the CSBM")
    weight_decay: float = param(5e-4, "Kipf & Welling 2017 (GCN) weight decay")
    epochs: int = param(100, "ours: full-batch training converges within 100 epochs on 1-3k nodes")
    lambda_feature: float = param(0.5, "ours (stage 1, lambda_1): DANN weight on h0, same scale as lambda_3")
    lambda_final: float = param(0.5, "ours (stage 3, lambda_3): DANN weight on the final embeddings")
    structure_reweighting: bool = param(True, "paper: stage 2, layer-wise reweighting of propagation")
    ratio_estimator: str = param(
        "prototype", "ours: k-means prototypes + Pair-Align QP; 'density' is the continuous variant"
    )
    n_prototypes: int = param(8, "ours: K > the CSBM's 3 x 2 sub-clusters, so K never matches them")
    ratio_lambda: float = param(1e-3, "ours: QP pull to w = 1; small since prototype pairs are observed")
    ratio_delta: float = param(
        0.01, "ours: Pair-Align's gamma_reg delta; 0.05 over-shrank gamma at K = 8 (CSBM check)"
    )
    max_edge_weight: float = param(10.0, "ours: caps gamma so one rare prototype pair cannot dominate")
    warmup_epochs: int = param(20, "ours: reweight once the encoder has a first alignment (StruRW warm-up)")
    reestimate_every: int = param(10, "ours: StruRW/Pair-Align re-estimate every few epochs")
    label_weights: bool = param(False, "Pair-Align: label-shift weights beta as a switch (PA-BOTH)")
    label_lambda: float = param(1e-2, "ours: QP pull to beta = 1 (Pair-Align's lw_lambda)")
    adversarial_gamma: float = param(10.0, "DANN (Ganin & Lempitsky 2015): GRL ramp 2/(1+exp(-10p))-1")
    seed: int = param(0, "ours: seeds the initial weights and k-means")

    def __post_init__(self) -> None:
        for name in ("hidden", "num_layers", "epochs", "n_prototypes", "reestimate_every"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("warmup_epochs", self.warmup_epochs, minimum=0)
        check_int("seed", self.seed, minimum=0)
        if self.n_prototypes < 2:
            raise ValueError(f"n_prototypes must be >= 2, got {self.n_prototypes}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout}")
        check_positive("lr", self.lr)
        for name in (
            "weight_decay",
            "lambda_feature",
            "lambda_final",
            "ratio_lambda",
            "ratio_delta",
            "label_lambda",
            "adversarial_gamma",
        ):
            check_positive(name, getattr(self, name), allow_zero=True)
        check_positive("max_edge_weight", self.max_edge_weight)
        if self.max_edge_weight < 1:
            raise ValueError(f"max_edge_weight must be >= 1, got {self.max_edge_weight}")
        check_choice("ratio_estimator", self.ratio_estimator, RATIO_ESTIMATORS)
        for name in ("structure_reweighting", "label_weights"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be true or false, got {getattr(self, name)!r}")
