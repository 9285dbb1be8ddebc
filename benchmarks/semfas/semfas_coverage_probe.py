"""Does SEM-FAS's coverage mismatch flag out-of-regime inputs? A toy probe over seeds and input families.

Trains the small SEM-FAS of ``tests/methods/semfas/test_semfas_experiment.py`` (3 modalities x 6
features, d = 16,
2 heads, POVM rank 4) on a separable toy task, with the coverage-mass regulariser (``coverage_weight`` 0.5)
and without it (0.0) from the same initialisation, then prints per seed: test accuracy, the in-regime
mean coverage mismatch Tr(rho E_perp), and for four out-of-regime input families the ratio of their mean
coverage mismatch to the in-regime one (> 1: flagged). The README's "coverage element" note quotes it.

    PYTHONPATH=src python benchmarks/semfas/semfas_coverage_probe.py --seeds 5
"""

from __future__ import annotations

import argparse

import torch

from neurips26.methods.semfas.encoders import make_encoders
from neurips26.methods.semfas.model import SEMFAS
from neurips26.methods.semfas.training import TrainSettings, fit

MODALITIES = ("rgb", "depth", "ir")
# out-of-regime families: a far shifted cloud, a widened cloud, the opposite shift, a very wide cloud
FAMILIES = {"far": (4.0, -6.0), "wide": (4.0, 0.0), "plus": (1.0, 6.0), "wild": (10.0, 0.0)}


def toy(n: int, seed: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The test's toy task: the label shifts feature 0 of every modality by +-2."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 2, (n,), generator=generator)
    features = {m: torch.randn(n, 6, generator=generator) for m in MODALITIES}
    for m in features:
        features[m][:, 0] += 2.0 * (labels.float() * 2 - 1)
    return features, labels


def out_of_regime(family: str, seed: int, n: int = 200) -> dict[str, torch.Tensor]:
    scale, shift = FAMILIES[family]
    generator = torch.Generator().manual_seed(1000 + seed)
    return {m: torch.randn(n, 6, generator=generator) * scale + shift for m in MODALITIES}


def probe(seed: int, coverage_weight: float) -> str:
    torch.manual_seed(seed)
    model = SEMFAS(
        make_encoders(dict.fromkeys(MODALITIES, 6), 16, 0.0),
        dim=16,
        heads=2,
        povm_rank=4,
        use_coverage=True,
        coverage_weight=coverage_weight,
    )
    fit(model, *toy(400, 10 * seed), TrainSettings(epochs=30, batch_size=100, lr=0.02, modality_dropout=0.2))
    with torch.no_grad():
        features, labels = toy(200, 10 * seed + 1)
        output = model(features)
        inside = float(output.coverage_mismatch.mean())
        accuracy = float((output.probs.argmax(1) == labels).float().mean())
        ratios = {
            family: float(model(out_of_regime(family, seed)).coverage_mismatch.mean()) / inside
            for family in FAMILIES
        }
    shown = " ".join(f"{family} {ratio:.2f}" for family, ratio in ratios.items())
    head = f"weight {coverage_weight:.1f} seed {seed}: accuracy {accuracy:.3f} in-regime {inside:.4f}"
    return f"{head} | {shown}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for weight in (0.0, 0.5):
        for seed in range(args.seeds):
            print(probe(seed, weight), flush=True)


if __name__ == "__main__":
    main()
