"""``tiny-patchtst``: transformers' ``PatchTSTForPretraining`` (small) pretrained like ``tiny-tsfm``.

Same corpus (:func:`neurips26.methods.star.tsfm.generic_corpus`), same objective (masked patch
reconstruction, MSE
on the masked patches, 30% masked) and the same held-out evaluation as ``tiny-tsfm``, so the two backbones
differ in architecture only (PatchTST masks by zeroing patch values, has no learned mask token, and its
positional table fixes the window at ``context_length`` = 64 steps, STAR's window). Checkpoint and card in
``methods/star/checkpoints/tiny-patchtst``; rebuild with ``python -m neurips26.methods.star.tiny_patchtst
train``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from neurips26.methods.star.patchtst_backbone import PatchTSTBackbone
from neurips26.methods.star.tsfm import masked_pretraining

__all__ = ["PatchTSTPretrainConfig", "load_tiny_patchtst", "pretrain_tiny_patchtst", "save_tiny_patchtst"]

CHECKPOINT_DIR = Path(__file__).parent / "checkpoints" / "tiny-patchtst"


@dataclass(frozen=True)
class PatchTSTPretrainConfig:
    """Pretraining recipe (tiny-tsfm's, with PatchTST's fixed 64-step window; fewer steps: ~2 core-min)."""

    seed: int = 0
    n_series: int = 4000
    series_length: int = 512
    window: int = 64
    steps: int = 1500
    batch_size: int = 128
    lr: float = 2e-3
    mask_ratio: float = 0.3
    eval_series: int = 200


def pretrain_tiny_patchtst(
    config: PatchTSTPretrainConfig | None = None, log_every: int = 100
) -> tuple[PatchTSTBackbone, dict]:
    """Pretrain a small PatchTST by masked patch reconstruction; returns the backbone and a log with the
    held-out masked-patch MSE against the mean and linear-interpolation references."""
    config = config or PatchTSTPretrainConfig()
    model = PatchTSTBackbone.small(context_length=config.window, seed=config.seed)
    model.train()
    return model, masked_pretraining(model, config, model.model.config.to_dict(), log_every)


def save_tiny_patchtst(model: PatchTSTBackbone, log: dict, directory: Path = CHECKPOINT_DIR) -> None:
    """Write ``model.pt`` (state dict), ``config.json`` (PatchTSTConfig) and ``training_log.json``."""
    directory.mkdir(parents=True, exist_ok=True)
    torch.save(model.model.state_dict(), directory / "model.pt")
    (directory / "config.json").write_text(json.dumps(model.model.config.to_dict(), indent=2) + "\n")
    (directory / "training_log.json").write_text(json.dumps(log, indent=1) + "\n")


def load_tiny_patchtst(directory: Path | str = CHECKPOINT_DIR) -> PatchTSTBackbone:
    """The committed ``tiny-patchtst``, frozen and in eval mode (``FileNotFoundError`` names the rebuild
    command when the files are missing)."""
    from transformers import PatchTSTConfig, PatchTSTForPretraining

    directory = Path(directory)
    weights, config_file = directory / "model.pt", directory / "config.json"
    if not weights.is_file() or not config_file.is_file():
        raise FileNotFoundError(
            f"tiny-patchtst checkpoint missing in {directory}: "
            "rebuild it with `python -m neurips26.methods.star.tiny_patchtst train`"
        )
    model = PatchTSTForPretraining(PatchTSTConfig.from_dict(json.loads(config_file.read_text())))
    model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    backbone = PatchTSTBackbone(model.eval())
    for p in backbone.parameters():
        p.requires_grad_(False)
    return backbone


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m neurips26.methods.star.tiny_patchtst", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="pretrain tiny-patchtst and write its checkpoint")
    train.add_argument("--steps", type=int, default=PatchTSTPretrainConfig.steps)
    train.add_argument("--out", type=Path, default=CHECKPOINT_DIR)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    model, log = pretrain_tiny_patchtst(PatchTSTPretrainConfig(steps=args.steps))
    save_tiny_patchtst(model, log, args.out)
    print(json.dumps({k: log[k] for k in ("evaluation", "n_parameters", "train_seconds")}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
