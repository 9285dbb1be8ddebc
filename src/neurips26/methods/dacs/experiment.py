"""The DACS experiment: does dual (stage-aware) alignment beat single-stage GDA under coupled shift?

Data: the CSBM pair of :mod:`neurips26.methods.dacs.graph_shift` in seven settings (none, FS-only,
FCSS-only with
a sub-cluster or a continuous-score structure factor, FS+FCSS coupled in both modes, coupled + label
shift), parameters fixed below before the first DACS result. Every system trains the same network
(MLP encoder, 2 GCN layers) with the same optimiser and epochs, and every system's checkpoint is picked by
one rule: the best accuracy on a small labelled target validation split (10% of target nodes, disjoint
from the test nodes), checked every ``eval_every`` epochs. Source-validation selection is also reported.
No estimator reads the generator's sub-clusters; the prototype count K (8) differs from the generator's
3 x 2 sub-clusters.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import torch

from neurips26.bench.experiment import Claim, Experiment, Metric, NotApplicable, Profile, Progress
from neurips26.core.config import nested, param
from neurips26.core.validation import check_choice, check_in_range, check_int, check_positive
from neurips26.methods.dacs.config import DACSConfig
from neurips26.methods.dacs.figures import strength_analysis

SETTINGS = ("none", "fs", "fcss", "fcss_score", "coupled", "coupled_score", "coupled_ls", "digits", "pygda")
COUPLED = ("coupled", "coupled_score", "coupled_ls")
FCSS_ONLY = ("fcss", "fcss_score")
# the coupled claims cover every setting built with both FS and FCSS: the CSBM ones and the semi-real digits
CLAIM_COUPLED = (*COUPLED, "digits")
SHIFT_TRUTH = {  # (feature shift present, FCSS present) per setting at nonzero knobs (as published)
    "none": (False, False),
    "fs": (True, False),
    "fcss": (False, True),
    "fcss_score": (False, True),
    "coupled": (True, True),
    "coupled_score": (True, True),
    "coupled_ls": (True, True),
    "digits": (True, True),
}  # "pygda": unknown (real data): diagnose_shift's scores are reported, its agreement is not


@dataclass
class DACSExperimentConfig:
    """Data, shift and evaluation settings; the method's own defaults live in ``method``."""

    method: DACSConfig = nested(DACSConfig, "DACS's own defaults (config.py); shared by every baseline")
    setting: str = param("coupled", "issue: none, FS-only, FCSS-only, coupled, coupled + label shift")
    n_nodes: int = param(1000, "ours: 1k per domain; the default profile uses 700, the full profile 3k")
    strength: float = param(1.0, "ours: multiplies both shift knobs (the full profile sweeps it)")
    feature_shift: float = param(1.0, "ours: one class spacing moves ~60% of source-only predictions")
    structure_shift: float = param(0.9, "ours: target same-sub-cluster edge share 0.5 -> 0.9")
    label_shift: float = param(0.8, "ours: target class shares about 0.19/0.30/0.51 in coupled_ls")
    avg_degree: float = param(10.0, "issue: degree about 10")
    target_val_fraction: float = param(0.1, "issue: a small labelled target validation split for selection")
    source_val_fraction: float = param(0.2, "ours: source validation split for the reported alternative")
    eval_every: int = param(10, "ours: checkpoints every 10 epochs for model selection")
    target_hops: int = param(3, "ours: A2GNN's parameter-free smoothing steps on the target (source: 0)")
    digits_feature_shift: float = param(0.5, "ours: intensity + blur that costs source-only ~15 points")
    digits_knn: int = param(8, "ours: kNN graphs with degree about 10 after symmetrising")
    pygda_root: str = param(
        "data/pygda", "ours: folder holding PyGDA-format raw files (not shipped: 'pygda' is n/a without them)"
    )
    pygda_family: str = param("citation", "PyGDA's benchmark families: citation, twitch, airport")
    pygda_source: str = param("ACMv9", "PyGDA/UDAGCN's Citation task ACMv9 -> DBLPv7")
    pygda_target: str = param("DBLPv7", "PyGDA/UDAGCN's Citation task ACMv9 -> DBLPv7")

    def __post_init__(self) -> None:
        check_choice("setting", self.setting, SETTINGS)
        check_int("n_nodes", self.n_nodes, minimum=50)
        check_int("eval_every", self.eval_every, minimum=1)
        check_int("target_hops", self.target_hops, minimum=1)
        check_int("digits_knn", self.digits_knn, minimum=1)
        from neurips26.methods.dacs.pygda_format import FAMILIES

        check_choice("pygda_family", self.pygda_family, tuple(FAMILIES))
        for name in ("strength", "feature_shift", "structure_shift", "label_shift", "digits_feature_shift"):
            check_positive(name, getattr(self, name), allow_zero=True)
        check_positive("avg_degree", self.avg_degree)
        check_in_range("target_val_fraction", self.target_val_fraction, 0.01, 0.5)
        check_in_range("source_val_fraction", self.source_val_fraction, 0.01, 0.5)

    def shift_spec(self) -> Any:
        """The generator's parameters of this setting."""
        from neurips26.methods.dacs.graph_shift import CSBMShift

        fs = self.setting in ("fs", *COUPLED)
        fcss = self.setting in (*FCSS_ONLY, *COUPLED)
        return CSBMShift(
            n_nodes=self.n_nodes,
            avg_degree=self.avg_degree,
            feature_shift=self.feature_shift * self.strength if fs else 0.0,
            structure_shift=min(self.structure_shift * self.strength, 1.0) if fcss else 0.0,
            structure_mode="score" if self.setting.endswith("_score") else "subcluster",
            label_shift=self.label_shift if self.setting == "coupled_ls" else 0.0,
        )


@dataclass(frozen=True)
class SystemSpec:
    """One system: DACS (with a config) or a re-implemented baseline (by name)."""

    name: str
    kind: str  # "dacs" or "baseline"
    method: DACSConfig


def _dacs(name: str, **changes: Any):
    return lambda config: SystemSpec(name, "dacs", replace(config.method, **changes))


def _baseline(name: str, **changes: Any):
    return lambda config: SystemSpec(name, "baseline", replace(config.method, **changes))


SYSTEMS = {
    "dacs": _dacs("dacs"),
    "source_only": _baseline("source_only"),
    "dann_gcn": _baseline("dann_gcn"),
    "strurw": _baseline("strurw"),
    "pa_css": _baseline("pa_css"),
    "pa_both": _baseline("pa_both"),
    "a2gnn": _baseline("a2gnn"),
    # ablations: which stages are on
    "dacs_stage1": _dacs("dacs_stage1", structure_reweighting=False, lambda_final=0.0),
    "dacs_stage2": _dacs("dacs_stage2", lambda_feature=0.0, lambda_final=0.0),
    "dacs_stage13": _dacs("dacs_stage13", structure_reweighting=False),
    "dacs_density": _dacs("dacs_density", ratio_estimator="density"),
    "dacs_lw": _dacs("dacs_lw", label_weights=True),  # + Pair-Align's label weights (for label shift)
}
SINGLE_STAGE = ("dann_gcn", "strurw", "pa_css", "dacs_stage1", "dacs_stage2")


def _splits(n: int, fraction: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(n, generator=generator)
    n_val = max(1, round(fraction * n))
    val = torch.zeros(n, dtype=torch.bool)
    val[order[:n_val]] = True
    return val, ~val


def _macro_f1(pred: np.ndarray, truth: np.ndarray) -> float:
    from sklearn.metrics import f1_score

    return float(f1_score(truth, pred, average="macro"))


def shift_truth(config: DACSExperimentConfig) -> tuple[bool, bool] | None:
    """(FS present, FCSS present) as the generator is asked for them; None for real data (unknown).

    Read from the knobs, not only the setting's name: a knob set to 0 (the ``strength`` profile's grid
    does this) turns that shift off. At nonzero knobs this equals ``SHIFT_TRUTH[setting]``.
    """
    if config.setting not in SHIFT_TRUTH:
        return None
    if config.setting == "digits":
        return (
            config.digits_feature_shift * config.strength > 0,
            config.structure_shift * config.strength > 0,
        )
    spec = config.shift_spec()
    return (spec.feature_shift > 0, spec.structure_shift > 0)


def _pygda_pair(config: DACSExperimentConfig) -> Any:
    """The PyGDA-format pair named in the config; ``NotApplicable`` (saying why) when its files are absent."""
    from neurips26.methods.dacs.pygda_format import PyGDAFilesMissing, load_pygda_pair

    if config.strength != 1.0:
        raise NotApplicable("a PyGDA pair's shift is the data's own: strength applies to synthetic pairs")
    try:
        return load_pygda_pair(
            config.pygda_root, config.pygda_family, config.pygda_source, config.pygda_target
        )
    except PyGDAFilesMissing as exc:
        raise NotApplicable(f"PyGDA files absent ({exc}); set pygda_root to run this setting") from None


def run(
    system: SystemSpec, config: DACSExperimentConfig, profile: Profile, seed: int, progress: Progress
) -> dict:
    from neurips26.methods.dacs.baselines import GDABaselineTrainer
    from neurips26.methods.dacs.diagnose import diagnose_shift
    from neurips26.methods.dacs.graph_shift import make_csbm_pair, make_digits_pair
    from neurips26.methods.dacs.integration import DACSTrainer

    if system.name == "dacs_density" and config.n_nodes > 3000:
        raise NotApplicable("the edge density-ratio classifier variant is run up to 3k nodes per domain")
    if config.setting == "pygda":  # real benchmark files in PyGDA's layout, only when present
        pair = _pygda_pair(config)
    elif config.setting == "digits":  # semi-real: sklearn digits, kNN graphs, FS + FCSS in the target
        pair = make_digits_pair(
            seed=seed,
            feature_shift=config.digits_feature_shift * config.strength,
            structure_shift=min(config.structure_shift * config.strength, 1.0),
            k=config.digits_knn,
        )
    else:
        pair = make_csbm_pair(config.shift_spec(), seed=seed)
    source, target = pair.source, pair.target
    source_val, source_train = _splits(source.num_nodes, config.source_val_fraction, seed + 1)
    target_val, target_test = _splits(target.num_nodes, config.target_val_fraction, seed + 2)
    source.train_mask = source_train
    unlabelled = target.clone()
    for key in ("y", "subcluster", "clean_x"):  # nothing latent or labelled reaches the trainer
        if key in unlabelled:
            del unlabelled[key]
    method = replace(system.method, seed=seed)
    if system.kind == "dacs":
        trainer: Any = DACSTrainer(method)
    else:
        trainer = GDABaselineTrainer(system.name, method, target_hops=config.target_hops)
    checkpoints: list[tuple[float, float, np.ndarray]] = []
    y_t, y_s = target.y, source.y

    def evaluate(epoch: int, model: torch.nn.Module) -> None:
        if (epoch + 1) % config.eval_every and epoch + 1 != method.epochs:
            return
        logits_t = trainer.predict_logits(unlabelled)
        with torch.no_grad():
            pred_s = model(source.x, source.edge_index).argmax(1)
        model.train()
        pred_t = logits_t.argmax(1)
        val_t = float((pred_t[target_val] == y_t[target_val]).float().mean())
        val_s = float((pred_s[source_val] == y_s[source_val]).float().mean())
        checkpoints.append((val_t, val_s, pred_t.numpy()))

    start = time.perf_counter()
    trainer.fit(source, unlabelled, callback=evaluate)
    seconds = time.perf_counter() - start
    # one selection rule for every system: best target-validation accuracy (earliest on ties)
    best_t = max(range(len(checkpoints)), key=lambda i: (checkpoints[i][0], -i))
    best_s = max(range(len(checkpoints)), key=lambda i: (checkpoints[i][1], -i))
    truth = y_t[target_test].numpy()
    pred = checkpoints[best_t][2][target_test.numpy()]
    pred_src = checkpoints[best_s][2][target_test.numpy()]
    metrics = {
        "target_accuracy": float((pred == truth).mean()),
        "target_macro_f1": _macro_f1(pred, truth),
        "target_accuracy_source_selected": float((pred_src == truth).mean()),
        "train_seconds": seconds,
        "epoch_ms": 1000.0 * seconds / method.epochs,
    }
    has_truth = hasattr(pair, "true_edge_ratio")
    if (
        has_truth
        and system.kind == "dacs"
        and method.structure_reweighting
        and method.ratio_estimator == "prototype"
    ):
        truth_ratio = pair.true_edge_ratio()
        estimate = trainer.edge_weights_[0]
        baseline_error = float((truth_ratio - 1.0).abs().mean())
        error = float((estimate - truth_ratio).abs().mean())
        metrics["gamma_error"] = error
        metrics["gamma_error_vs_ones"] = error / baseline_error if baseline_error > 1e-9 else float("nan")
        metrics["reestimation_seconds"] = trainer.reestimation_seconds_
    if system.name == "dacs":
        diagnosis = diagnose_shift(source, unlabelled, seed=seed)
        truth = shift_truth(config)
        if truth is not None:
            fs_true, fcss_true = truth
            metrics["diagnosis_agreement"] = 0.5 * (
                float(diagnosis.feature_shift == fs_true) + float(diagnosis.structure_shift == fcss_true)
            )
        metrics["feature_auc"] = diagnosis.feature_auc
        metrics["fcss_score"] = diagnosis.fcss_score
    return metrics


# "none" (whose claim is vacuous) runs in the settings profile: with it the default took 376 s > 360 s
DEFAULT_SETTINGS = ["fs", "fcss", "fcss_score", "coupled", "coupled_score"]
DEFAULT_SYSTEMS = (
    "dacs",
    "source_only",
    "dann_gcn",
    "strurw",
    "pa_css",
    "dacs_stage1",
    "dacs_stage2",
    "dacs_stage13",
)
DEFAULT_OVERRIDES = {"n_nodes": 700, "method.epochs": 80, "method.warmup_epochs": 15}
# the K sweep: fewer, as many and more prototypes than the generator's 3 x 2 sub-clusters (K = 8 is DACS's)
K_SWEEP = [3, 6, 8, 12, 24]
# accuracy vs shift strength: both knobs of the coupled setting swept (4 x 4, the defaults 1.0 and 0.9
# included, 0 = that shift off); the feature_shift = 0 row is FCSS-only, the structure_shift = 0 column
# FS-only, (0, 0) no shift. Fixed before any of these cells ran.
STRENGTH_GRID = {"feature_shift": [0.0, 0.5, 1.0, 1.5], "structure_shift": [0.0, 0.3, 0.6, 0.9]}
STRENGTH_SYSTEMS = ("dacs", "source_only", "dann_gcn", "pa_css", "dacs_stage2", "dacs_stage13")
STRONG_FCSS = (0.6, 0.9)
# the per-setting claims are judged where the grid has settings (the strength grid has none: listed so its
# block shows only its own claim instead of five 'no grid point covered' rows)
SETTING_PROFILES = ("smoke", "default", "seeds", "ksweep", "settings", "full")
ACCURACY_MARGIN = 0.02
MARGIN_SOURCE = "ours: 2 points of accuracy, below the seed-to-seed spread of source-only on the CSBM"

# Positive contrasts (issue #48): a working DA baseline vs source-only training on the shift it targets
# (DANN for feature shift, StruRW for conditional structure shift). Without shift no DA method is known to
# gain: that claim's contrast stays unresolved and its verdict uninformative, as it should.
FS_CONTRAST = ("dann_gcn", "source_only")
FCSS_CONTRAST = ("strurw", "source_only")

EXPERIMENT = Experiment(
    slug="dacs",
    config_cls=DACSExperimentConfig,
    claims=(
        # one paired test: issue #43 found the former claims 1 ("beats every single-stage method") and 2
        # ("beats stages 1+3 and stage 2 alone") both judged against stage 2 alone, the best-mean baseline
        # of each, so one comparison was counted twice
        Claim(
            "under coupled FS + FCSS, DACS beats every single-stage method and stages 1+3 on target "
            "accuracy (each stage removes an error the other leaves)",
            "target_accuracy",
            "dacs",
            (*SINGLE_STAGE, "dacs_stage13"),
            controls=("source_only",),
            contrast=FS_CONTRAST,
            where={"setting": CLAIM_COUPLED},
            profiles=SETTING_PROFILES,
        ),
        Claim(
            "on FS-only shift DACS is no worse than DANN-GCN",
            "target_accuracy",
            "dacs",
            ("dann_gcn",),
            kind="noninferior",
            margin=ACCURACY_MARGIN,
            margin_source=MARGIN_SOURCE,
            controls=("source_only",),
            contrast=FS_CONTRAST,
            where={"setting": ("fs",)},
            profiles=SETTING_PROFILES,
        ),
        Claim(
            "on FCSS-only shift DACS is no worse than StruRW and Pair-Align",
            "target_accuracy",
            "dacs",
            ("strurw", "pa_css"),
            kind="noninferior",
            margin=ACCURACY_MARGIN,
            margin_source=MARGIN_SOURCE,
            controls=("source_only",),
            contrast=FCSS_CONTRAST,
            where={"setting": FCSS_ONLY},
            profiles=SETTING_PROFILES,
        ),
        Claim(
            "without shift DACS loses nothing against source-only training",
            "target_accuracy",
            "dacs",
            ("source_only",),
            kind="noninferior",
            margin=ACCURACY_MARGIN,
            margin_source=MARGIN_SOURCE,
            # control: an adversarial DA baseline; if it loses nothing either, this no-harm claim says
            # nothing specific to DACS (and the verdict says vacuous)
            controls=("dann_gcn",),
            contrast=FS_CONTRAST,
            where={"setting": ("none",)},
            profiles=SETTING_PROFILES,
        ),
        Claim(
            "once FCSS is strong (structure_shift >= 0.6), DACS beats DANN-GCN and DACS without stage 2"
            " (stages 1+3) at every feature-shift level",
            "target_accuracy",
            "dacs",
            ("dann_gcn", "dacs_stage13"),
            controls=("source_only",),
            contrast=FS_CONTRAST,
            where={"structure_shift": STRONG_FCSS},
            profiles=("strength",),
        ),
    ),
    metrics=(
        Metric(
            "target_accuracy", "max", "", "target test accuracy, checkpoint by target-validation accuracy"
        ),
        Metric("target_macro_f1", "max", "", "target test macro-F1, same checkpoint"),
        Metric(
            "target_accuracy_source_selected",
            "max",
            "",
            "target test accuracy, checkpoint by source validation",
        ),
        Metric("gamma_error", "min", "", "mean |w_hat - w*| over source edges, layer 1 (w* the generator's)"),
        Metric(
            "gamma_error_vs_ones",
            "min",
            "relative",
            "gamma_error / mean |1 - w*| (below 1: better than none)",
        ),
        Metric("diagnosis_agreement", "max", "", "diagnose_shift's FS and FCSS flags agree with the setting"),
        Metric("feature_auc", "max", "", "diagnose_shift: domain-classifier AUC on raw features"),
        Metric("fcss_score", "max", "", "diagnose_shift: mean |gamma - 1| of the prototype edge ratio"),
        Metric(
            "train_seconds", "min", "s", "wall time of training (selection checkpoints included)", timing=True
        ),
        Metric(
            "epoch_ms", "min", "ms", "training wall time per epoch (re-estimation amortised)", timing=True
        ),
        Metric("reestimation_seconds", "min", "s", "wall time of stage 2's re-estimations", timing=True),
    ),
    systems=SYSTEMS,
    profiles={
        "smoke": Profile(
            "smoke",
            budget_s=40,
            seeds=1,
            overrides={
                "n_nodes": 300,
                "method.epochs": 20,
                "method.warmup_epochs": 5,
                "method.reestimate_every": 5,
            },
            grid={"setting": ["coupled"]},
            systems=("dacs", "source_only", "dann_gcn", "strurw", "pa_both", "a2gnn", "dacs_density"),
        ),
        "default": Profile(
            "default",
            budget_s=291,  # measured: 290.7 s, the sum of these cells' wall times (--jobs 1, load ~4)
            seeds=5,
            overrides=DEFAULT_OVERRIDES,
            grid={"setting": DEFAULT_SETTINGS},
            systems=DEFAULT_SYSTEMS,
        ),
        # more seeds on fewer grid points: the default's two coupled settings at 12 seeds (the default's
        # 5 pairs left both coupled claims inconclusive; the paired spread there asks for ~10-17 pairs)
        "seeds": Profile(
            "seeds",
            budget_s=272,  # measured: 158.6 s for 112 of 192 cells (80 resumed from the default), one worker
            seeds=12,
            overrides=DEFAULT_OVERRIDES,
            grid={"setting": ["coupled", "coupled_score"]},
            systems=DEFAULT_SYSTEMS,
        ),
        # K differs from the generator's sub-cluster count: DACS's accuracy and gamma error per K
        "ksweep": Profile(
            "ksweep",
            budget_s=292,  # measured: 292.0 s, one worker (K = 24 cells take ~20 s: the QP, see README)
            seeds=5,
            overrides=DEFAULT_OVERRIDES,
            grid={"setting": ["coupled", "coupled_score"], "method.n_prototypes": K_SWEEP},
            systems=("dacs",),
        ),
        # the settings the default leaves out: no shift, coupled + label shift, semi-real digits, PyGDA files
        "settings": Profile(
            "settings",
            budget_s=204,  # measured: 140.4 s + 63.5 s ("none" added later), one worker, no PyGDA files
            seeds=5,
            overrides=DEFAULT_OVERRIDES,
            grid={"setting": ["none", "coupled_ls", "digits", "pygda"]},
            systems=(*DEFAULT_SYSTEMS, "pa_both", "dacs_lw"),
        ),
        # accuracy vs shift strength, one knob at a time and jointly (the figure the issue asks for:
        # benchmarks/dacs/dacs_strength.py draws it from the published JSON)
        "strength": Profile(
            "strength",
            budget_s=640,  # estimated: 80 (point, seed) pairs x ~8 s for these six systems, one worker
            seeds=5,
            overrides={**DEFAULT_OVERRIDES, "setting": "coupled"},
            grid=STRENGTH_GRID,
            systems=STRENGTH_SYSTEMS,
        ),
        "full": Profile(
            "full",
            # estimated, not measured: 9 settings x 3 strengths x 12 systems x 5 seeds = 1,620 cells; the
            # 1,440 synthetic ones at ~9 s (3k nodes) on one worker, the 180 PyGDA ones n/a without the files
            # (120 of them anywhere: a real pair has no strength); far above the ~25 core-minutes a method
            # gets here, so it has not been run (README: what the published profiles cover of it)
            budget_s=13000,
            seeds=5,
            overrides={"n_nodes": 3000},
            grid={"setting": list(SETTINGS), "strength": [0.5, 1.0, 1.5]},
        ),
    },
    run=run,
    ours="dacs",
    analyses={"strength": strength_analysis},  # accuracy vs shift strength: paired gains + the figure
)


def describe_systems() -> dict[str, dict]:
    """Each system's resolved method config (for ``neurips26 info`` readers and the README)."""
    config = DACSExperimentConfig()
    return {name: asdict(factory(config).method) for name, factory in SYSTEMS.items()}
