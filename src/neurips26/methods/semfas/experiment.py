"""The SEM-FAS experiment on the frozen synthetic multi-sensor generator
(``neurips26.methods.semfas.fas_sensors``).

Protocols (MMDG's, on the four synthetic sensor domains C/P/S/W):
- P1: leave one domain out (4 tasks: train on three domains, test on the fourth);
- P2: the P1 models tested with depth, IR, or depth + IR missing (zero-filled and masked);
- P3: limited sources, CW -> PS and PS -> CW;
- novel attacks: train on every domain without 3D masks, test the uncertainty scores at flagging masks.
Every system shares the encoders (fixed descriptors + a trainable MLP per modality), the optimiser, the
epochs and the modality dropout. The numbers do not transfer to CASIA-SURF, CeFA, WMCA or PADISI.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from neurips26.bench.experiment import Claim, Experiment, Metric, Profile, Progress
from neurips26.bench.setup import Setup, SetupContext
from neurips26.core.config import nested, param
from neurips26.core.validation import check_choice, check_in_range, check_int
from neurips26.methods.semfas.config import SEMFASConfig

DOMAINS = ("C", "P", "S", "W")
MODALITIES = ("rgb", "depth", "ir")
MISSING_SETS = {"d": ("depth",), "ir": ("ir",), "d_ir": ("depth", "ir")}
P3_TASKS = {"cw_ps": ("CW", "PS"), "ps_cw": ("PS", "CW")}
KINDS = ("semfas", "concat", "late", "mmdg", "tmc", "ts", "mcdropout", "rgb_only")


@dataclass
class SEMFASExperimentConfig:
    """Data and protocol settings; the method's own defaults live in ``method``."""

    method: SEMFASConfig = nested(SEMFASConfig, "SEM-FAS's own defaults (config.py); shared by every system")
    n_per_domain: int = param(300, "ours: samples rendered per sensor domain (the full profile uses 1000)")
    val_fraction: float = param(0.15, "ours: source validation split (thresholds, temperature scaling)")
    mc_passes: int = param(20, "issue: MC-dropout with 20 passes")
    novel_attack: str = param("mask", "ours: the attack type held out of training in the novel-attack test")
    p3: str = param("cw_ps,ps_cw", "MMDG P3: limited-source tasks (comma-separated; '' skips P3)")

    def __post_init__(self) -> None:
        check_int("n_per_domain", self.n_per_domain, minimum=40)
        check_int("mc_passes", self.mc_passes, minimum=1)
        check_in_range("val_fraction", self.val_fraction, 0.05, 0.5)
        check_choice("novel_attack", self.novel_attack, ("print", "replay", "mask", "partial"))
        for task in filter(None, self.p3.split(",")):
            check_choice("p3", task, tuple(P3_TASKS))


@dataclass(frozen=True)
class SystemSpec:
    """One system: its kind (SEM-FAS or a baseline) and the shared method config it is built from."""

    name: str
    kind: str
    method: SEMFASConfig


def _system(name: str, kind: str, **changes: Any):
    return lambda config: SystemSpec(name, kind, replace(config.method, **changes))


SYSTEMS = {
    "semfas": _system("semfas", "semfas"),
    "concat_erm": _system("concat_erm", "concat"),
    "late_fusion": _system("late_fusion", "late"),
    "mmdg_lite": _system("mmdg_lite", "mmdg"),
    "tmc": _system("tmc", "tmc"),
    "erm_ts": _system("erm_ts", "ts"),
    "erm_mcdropout": _system("erm_mcdropout", "mcdropout"),
    "semfas_real": _system("semfas_real", "semfas", use_phase=False),
    "semfas_pure": _system("semfas_pure", "semfas", heads=1),
    "semfas_nocov": _system("semfas_nocov", "semfas", use_coverage=False),
    "rgb_only": _system("rgb_only", "rgb_only"),
}
BASELINES = ("concat_erm", "late_fusion", "mmdg_lite", "tmc", "erm_ts", "erm_mcdropout")


def _dataset(
    config: SEMFASExperimentConfig, profile: Profile, seed: int, context: SetupContext
) -> dict[str, dict[str, Any]]:
    """Render the four domains for ``seed`` and describe each modality (shared by the seed's systems)."""
    from neurips26.methods.semfas.encoders import sensor_descriptors
    from neurips26.methods.semfas.fas_sensors import ATTACKS, render_domain

    data = {}
    for domain in DOMAINS:
        batch = render_domain(domain, config.n_per_domain, seed=seed)
        features = sensor_descriptors(batch.rgb, batch.depth, batch.ir)
        data[domain] = {
            "features": {m: torch.from_numpy(features[m]) for m in MODALITIES},
            "label": torch.from_numpy(batch.label),
            "attack": batch.attack,
            "cue": batch.cue,
            "attack_names": ATTACKS,
        }
    return data


SETUP = Setup("data", build=_dataset, key=lambda config, profile, seed: (seed, config.n_per_domain))


def _join(parts: list[dict[str, Any]], index: np.ndarray | None = None) -> dict[str, Any]:
    joined = {
        "features": {m: torch.cat([p["features"][m] for p in parts]) for m in MODALITIES},
        "label": torch.cat([p["label"] for p in parts]),
        "attack": np.concatenate([p["attack"] for p in parts]),
        "cue": np.concatenate([p["cue"] for p in parts]),
    }
    if index is not None:
        t = torch.from_numpy(index)
        joined = {
            "features": {m: v[t] for m, v in joined["features"].items()},
            "label": joined["label"][t],
            "attack": joined["attack"][index],
            "cue": joined["cue"][index],
        }
    return joined


def _split(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.default_rng(seed).permutation(n)
    n_val = max(2, round(fraction * n))
    return order[n_val:], order[:n_val]


def _mask(n: int, names: tuple[str, ...], missing: tuple[str, ...] = ()) -> torch.Tensor:
    return torch.tensor([[m not in missing for m in names]] * n, dtype=torch.bool)


class Trained:
    """A trained system with the feature standardisation of its training data."""

    def __init__(
        self, spec: SystemSpec, train: dict[str, Any], val: dict[str, Any], seed: int, mc_passes: int
    ):
        from neurips26.methods.semfas.baselines import ConcatERM, LateFusion, MMDGLite, TMCFusion
        from neurips26.methods.semfas.encoders import make_encoders
        from neurips26.methods.semfas.model import SEMFAS
        from neurips26.methods.semfas.training import TrainSettings, fit

        torch.manual_seed(seed)
        method = spec.method
        self.spec, self.mc_passes = spec, mc_passes
        self.names = ("rgb",) if spec.kind == "rgb_only" else MODALITIES
        feats = {m: train["features"][m] for m in self.names}
        self.mean = {m: v.mean(0) for m, v in feats.items()}
        self.std = {m: v.std(0).clamp_min(1e-4) for m, v in feats.items()}
        sizes = {m: v.shape[1] for m, v in feats.items()}
        encoders = make_encoders(sizes, method.hidden, method.encoder_dropout)
        if spec.kind == "semfas":
            self.model: Any = SEMFAS(
                encoders,
                method.dim,
                method.heads,
                method.povm_rank,
                temperature=method.temperature,
                use_phase=method.use_phase,
                use_coverage=method.use_coverage,
                coverage_weight=method.coverage_weight,
            )
        elif spec.kind in ("concat", "ts", "mcdropout", "rgb_only"):
            self.model = ConcatERM(encoders, method.hidden, dropout=method.encoder_dropout)
        elif spec.kind == "late":
            self.model = LateFusion(encoders, method.hidden)
        elif spec.kind == "mmdg":
            self.model = MMDGLite(encoders, method.hidden)
        else:
            self.model = TMCFusion(encoders, method.hidden)
        settings = TrainSettings(
            method.epochs, method.batch_size, method.lr, method.weight_decay, method.modality_dropout, seed
        )
        fit(self.model, self._standardise(train), train["label"], settings)
        self.calibrator = None
        val_prob, _ = self._forward(val, ())
        if spec.kind == "semfas":  # the paper's temperature, fitted on source validation
            from neurips26.methods.semfas.core import fit_temperature

            with torch.no_grad():
                born = self.model(self._standardise(val), _mask(len(val["label"]), self.names)).born
            self.model.temperature.fill_(fit_temperature(torch.log(born.clamp_min(1e-12)), val["label"]))
        elif spec.kind == "ts":
            from netcal.scaling import TemperatureScaling

            self.calibrator = TemperatureScaling()
            self.calibrator.fit(val_prob.astype(np.float64), val["label"].numpy())
        self.val_threshold_data = (val["label"].numpy(), self.predict(val)["score"])

    def _standardise(self, part: dict[str, Any]) -> dict[str, torch.Tensor]:
        return {m: (part["features"][m] - self.mean[m]) / self.std[m] for m in self.names}

    @torch.no_grad()
    def _forward(
        self, part: dict[str, Any], missing: tuple[str, ...]
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        inputs = self._standardise(part)
        mask = _mask(len(part["label"]), self.names, missing)
        if self.spec.kind == "mcdropout":
            self.model.train()
            probs = torch.stack([self.model(inputs, mask).probs for _ in range(self.mc_passes)]).mean(0)
            self.model.eval()
            entropy = -(probs * probs.clamp_min(1e-12).log()).sum(-1)
            return probs[:, 1].numpy(), {"uncertainty": entropy.numpy()}
        output = self.model(inputs, mask)
        extra: dict[str, np.ndarray] = {}
        if self.spec.kind == "semfas":
            extra = {
                "uncertainty": output.coverage_mismatch.numpy(),
                "mixedness": output.mixedness.numpy(),
                "ambiguity": output.ambiguity.numpy(),
                "main": output.main_effects[:, 1].numpy(),
                "shared": (
                    output.main_effects[:, 1]
                    + 0.5 * (output.pairwise[:, 1] + output.pairwise[:, 1].mT).sum(-1)
                ).numpy(),
            }
        else:
            extra = {"uncertainty": output.uncertainty.numpy()}
        return output.probs[:, 1].numpy(), extra

    def predict(self, part: dict[str, Any], missing: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
        score, extra = self._forward(part, missing)
        if self.calibrator is not None:
            score = np.asarray(self.calibrator.transform(score.astype(np.float64)), dtype=np.float64).reshape(
                -1
            )
            extra["uncertainty"] = -(
                score * np.log(np.clip(score, 1e-12, 1)) + (1 - score) * np.log(np.clip(1 - score, 1e-12, 1))
            )
        return {"score": score, **extra}

    def occlusion(self, part: dict[str, Any], full_score: np.ndarray) -> np.ndarray:
        """Occlusion attribution: the drop of the spoof probability when each modality is removed."""
        drops = np.zeros((len(full_score), len(MODALITIES)))
        for i, name in enumerate(MODALITIES):
            if name in self.names and len(self.names) > 1:
                drops[:, i] = full_score - self.predict(part, (name,))["score"]
        return drops


def _quality(prefix: str, labels: np.ndarray, score: np.ndarray, val: tuple[np.ndarray, np.ndarray]) -> dict:
    from neurips26.methods.semfas import evaluation as ev

    return {
        f"{prefix}_hter": ev.hter(labels, score, ev.eer_threshold(labels, score)),
        f"{prefix}_hter_src": ev.hter(labels, score, ev.eer_threshold(*val)),
        f"{prefix}_auc": ev.auc(labels, score),
    }


def run(
    system: SystemSpec,
    config: SEMFASExperimentConfig,
    context: SetupContext,
    profile: Profile,
    seed: int,
    progress: Progress,
) -> dict:
    from neurips26.methods.semfas import evaluation as ev

    method = replace(system.method, seed=seed)
    spec = replace(system, method=method)
    data = context.data
    rows: dict[str, list[float]] = {}

    def add(values: dict) -> None:
        for key, value in values.items():
            rows.setdefault(key, []).append(float(value))

    def trained_on(parts: list[dict[str, Any]], salt: int) -> tuple[Trained, dict]:
        joined = _join(parts)
        train_index, val_index = _split(len(joined["label"]), config.val_fraction, seed * 7 + salt)
        train, val = _join([joined], train_index), _join([joined], val_index)
        return Trained(spec, train, val, seed * 7 + salt, config.mc_passes), val

    for t, target in enumerate(progress.loop(DOMAINS, total=len(DOMAINS), desc=f"{system.name} P1")):
        model, _ = trained_on([data[d] for d in DOMAINS if d != target], t)
        part = {**data[target], "features": data[target]["features"]}
        labels, cue = part["label"].numpy(), part["cue"]
        out = model.predict(part)
        score = out["score"]
        add(_quality("p1", labels, score, model.val_threshold_data))
        errors = ((score >= 0.5).astype(int) != labels).astype(float)
        add(
            {
                "p1_tpr_fpr1": ev.tpr_at_fpr(labels, score, 0.01),
                "p1_ece": ev.ece(labels, score),
                "p1_ece_netcal": ev.ece_netcal(labels, score),
                "p1_aurc": ev.aurc(errors, out["uncertainty"]),
                "p1_misclass_auroc": ev.misclassification_auroc(errors, out["uncertainty"]),
                "attribution_occlusion": ev.attribution_accuracy(model.occlusion(part, score), cue),
            }
        )
        if "main" in out:
            add(
                {
                    "attribution_accuracy": ev.attribution_accuracy(out["main"], cue),
                    "attribution_shared": ev.attribution_accuracy(out["shared"], cue),
                    "p1_aurc_ambiguity": ev.aurc(errors, out["ambiguity"]),
                    "p1_aurc_mixedness": ev.aurc(errors, out["mixedness"]),
                    "p1_misclass_auroc_ambiguity": ev.misclassification_auroc(errors, out["ambiguity"]),
                    "p1_misclass_auroc_mixedness": ev.misclassification_auroc(errors, out["mixedness"]),
                }
            )
        else:
            add({"attribution_accuracy": rows["attribution_occlusion"][-1]})
        for key, missing in MISSING_SETS.items():
            # the RGB-only control never sees depth or IR
            missing_score = score if system.kind == "rgb_only" else model.predict(part, missing)["score"]
            quality = _quality(f"p2_{key}", labels, missing_score, model.val_threshold_data)
            add({**quality, "p2_hter": quality[f"p2_{key}_hter"], "p2_auc": quality[f"p2_{key}_auc"]})
    for salt, task in enumerate(filter(None, config.p3.split(","))):
        sources, targets = P3_TASKS[task]
        model, _ = trained_on([data[d] for d in sources], 10 + salt)
        part = _join([data[d] for d in targets])
        add(_quality("p3", part["label"].numpy(), model.predict(part)["score"], model.val_threshold_data))
    # novel attack types: train on every domain without them, flag them at test
    from neurips26.methods.semfas.fas_sensors import ATTACKS

    novel = ATTACKS.index(config.novel_attack)
    everything = _join([data[d] for d in DOMAINS])
    is_novel = everything["attack"] == novel
    rng = np.random.default_rng(seed * 7 + 20)
    seen = np.flatnonzero(~is_novel)
    rng.shuffle(seen)
    n_test = len(seen) * 3 // 10
    model, _ = trained_on([_join([everything], seen[n_test:])], 20)
    test_index = np.concatenate([seen[:n_test], np.flatnonzero(is_novel)])
    test = _join([everything], test_index)
    flag = (test["attack"] == novel).astype(int)
    out = model.predict(test)
    add({"novelty_auroc": ev.auc(flag, out["uncertainty"])})
    add({"novelty_auroc_mixedness": ev.auc(flag, out.get("mixedness", out["uncertainty"]))})
    if "mixedness" in out:
        add(
            {
                "novel_mixedness_rise": float(
                    out["mixedness"][flag == 1].mean() - out["mixedness"][flag == 0].mean()
                ),
                "novel_coverage_rise": float(
                    out["uncertainty"][flag == 1].mean() - out["uncertainty"][flag == 0].mean()
                ),
            }
        )
    return {key: float(np.nanmean(values)) for key, values in rows.items()}


def _m(name: str, goal: str, description: str) -> Metric:
    return Metric(name, goal, "", description)  # type: ignore[arg-type]


METRICS = (
    _m("p1_hter", "min", "P1 leave-one-domain-out HTER at the target EER threshold (mean of 4 tasks)"),
    _m("p1_hter_src", "min", "P1 HTER at the source-validation EER threshold"),
    _m("p1_auc", "max", "P1 AUC (spoof = positive)"),
    _m("p1_tpr_fpr1", "max", "P1 attack detection rate at 1% bona-fide false alarms"),
    _m("p1_ece", "min", "P1 expected calibration error (torchmetrics, 15 bins)"),
    _m("p1_ece_netcal", "min", "P1 ECE from netcal (the cross-check)"),
    _m("p1_aurc", "min", "P1 area under risk-coverage of the system's own uncertainty"),
    _m("p1_misclass_auroc", "max", "P1 AUROC of the own uncertainty at flagging errors"),
    _m("p1_aurc_ambiguity", "min", "SEM-FAS: AURC of the ambiguity"),
    _m("p1_aurc_mixedness", "min", "SEM-FAS: AURC of the mixedness"),
    _m("p1_misclass_auroc_ambiguity", "max", "SEM-FAS: error-detection AUROC of the ambiguity"),
    _m("p1_misclass_auroc_mixedness", "max", "SEM-FAS: error-detection AUROC of the mixedness"),
    *(
        _m(f"p2_{key}_{name}", goal, f"P2 {name.upper()} with {'+'.join(missing)} missing")
        for key, missing in MISSING_SETS.items()
        for name, goal in (("hter", "min"), ("hter_src", "min"), ("auc", "max"))
    ),
    _m("p2_hter", "min", "P2 HTER (target EER threshold), mean over D, IR and D+IR missing"),
    _m("p2_auc", "max", "P2 AUC, mean over D, IR and D+IR missing"),
    _m("p3_hter", "min", "P3 limited-source HTER (CW->PS, PS->CW)"),
    _m("p3_hter_src", "min", "P3 HTER at the source-validation threshold"),
    _m("p3_auc", "max", "P3 AUC"),
    _m(
        "attribution_accuracy",
        "max",
        "attacks whose top attribution is the cue modality (SEM-FAS: top main effect; baselines: occlusion)",
    ),
    _m("attribution_shared", "max", "SEM-FAS: same with main effect + half of each pairwise term"),
    _m("attribution_occlusion", "max", "same with occlusion attributions, for every system"),
    _m(
        "novelty_auroc",
        "max",
        "AUROC of the own uncertainty (SEM-FAS: coverage mismatch) at flagging held-out masks",
    ),
    _m("novelty_auroc_mixedness", "max", "same with SEM-FAS's mixedness (baselines: their own uncertainty)"),
    _m("novel_mixedness_rise", "max", "SEM-FAS: mean mixedness on held-out masks minus on seen samples"),
    _m(
        "novel_coverage_rise",
        "max",
        "SEM-FAS: mean coverage mismatch on held-out masks minus on seen samples",
    ),
)


# Positive contrasts (issue #48). Detection and attribution: the multimodal ERM vs the RGB-only model (the
# depth and IR cues are there to be found). Novelty: MC-dropout uncertainty vs temperature-scaled softmax
# confidence, the known better out-of-distribution score of the two.
MODALITY_CONTRAST = ("concat_erm", "rgb_only")
UNCERTAINTY_CONTRAST = ("erm_mcdropout", "erm_ts")


def _claim(
    text: str, metric: str, versus=BASELINES, controls=("rgb_only",), contrast=MODALITY_CONTRAST
) -> Claim:
    return Claim(text, metric, "semfas", tuple(versus), controls=tuple(controls), contrast=contrast)


OCCLUSION_BASELINES = ("concat_erm", "late_fusion", "mmdg_lite", "tmc")
DEFAULT_SYSTEMS = ("semfas", *BASELINES, "rgb_only", "semfas_real", "semfas_nocov")

EXPERIMENT = Experiment(
    slug="semfas",
    config_cls=SEMFASExperimentConfig,
    claims=(
        _claim("P1: SEM-FAS has a lower HTER than the best baseline (paper: -2.18 points)", "p1_hter"),
        _claim("P1: SEM-FAS has a higher AUC than the best baseline (paper: +1.38)", "p1_auc"),
        _claim("P2 (missing D, IR, D+IR): SEM-FAS has a lower HTER than the best baseline", "p2_hter"),
        _claim("P2: SEM-FAS has a higher AUC than the best baseline", "p2_auc"),
        _claim(
            "SEM-FAS's main effects find the cue modality more often than occlusion on the baselines",
            "attribution_accuracy",
            OCCLUSION_BASELINES,
        ),
        _claim(
            "coverage mismatch flags held-out attack types better than the baselines' uncertainty",
            "novelty_auroc",
            controls=("rgb_only", "semfas_nocov"),
            contrast=UNCERTAINTY_CONTRAST,
        ),
        _claim(
            "mixedness flags held-out attack types better than the baselines' uncertainty",
            "novelty_auroc_mixedness",
            contrast=UNCERTAINTY_CONTRAST,
        ),
    ),
    metrics=METRICS,
    systems=SYSTEMS,
    profiles={
        "smoke": Profile(
            "smoke",
            budget_s=40,
            seeds=1,
            overrides={"n_per_domain": 60, "method.epochs": 3, "p3": "cw_ps", "mc_passes": 3},
            systems=DEFAULT_SYSTEMS,
        ),
        "default": Profile("default", budget_s=180, seeds=5, overrides={"p3": ""}, systems=DEFAULT_SYSTEMS),
        "full": Profile("full", budget_s=3600, seeds=10, overrides={"n_per_domain": 1000}),
    },
    run=run,
    ours="semfas",
    setup=SETUP,
)
