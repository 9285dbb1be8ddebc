"""A tiny time-series foundation model (``tiny-tsfm``) and the ``TSBackbone`` protocol adapters build on.

MOMENT (Goswami et al., 2024) pretrains a channel-independent patch transformer by masked patch
reconstruction and detects anomalies from the reconstruction error. No TSFM weights can be fetched here,
so ``tiny-tsfm`` is the same recipe at toy scale (patch 8, d_model 64, 2 layers, ~100 k parameters),
pretrained in a few minutes on a generic synthetic corpus (sines, square and sawtooth waves, AR(2),
random walks, level shifts, bursts; none of it from the anomaly benchmarks) and committed under
``checkpoints/tiny-tsfm/`` with a card.

The blocks are written out (pre-norm attention + MLP on ``nn.Linear``) rather than taken from
``nn.TransformerEncoderLayer`` because adapters must wrap the projections as modules: the encoder layer's
fused fast path calls their weights directly and would bypass any injected adapter.

Reproduce the checkpoint::

    python -m neurips26.methods.star.tsfm train      # ~3 minutes on 2 cores, writes checkpoints/tiny-tsfm/
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "TSBackbone",
    "TSFMPretrainConfig",
    "TinyTSFM",
    "TinyTSFMConfig",
    "generic_corpus",
    "load_tiny_tsfm",
    "pretrain_tiny_tsfm",
]

CHECKPOINT_DIR = Path(__file__).parent / "checkpoints" / "tiny-tsfm"


@runtime_checkable
class TSBackbone(Protocol):
    """What an adapter needs from a channel-independent patch backbone.

    Shapes: ``series`` (batch, channels, length) with length a multiple of ``patch_len``; ``patches``
    (rows, n_patches, patch_len) where rows = batch * channels; ``hidden`` (rows, n_patches, d_model).
    """

    patch_len: int
    d_model: int

    def patchify(self, series: torch.Tensor) -> torch.Tensor: ...

    def embed(self, patches: torch.Tensor) -> torch.Tensor: ...

    def encode(self, patches: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor: ...

    def reconstruct(self, hidden: torch.Tensor) -> torch.Tensor: ...

    def adaptable_linears(self) -> dict[str, nn.Linear]: ...


@dataclass(frozen=True)
class TinyTSFMConfig:
    """Architecture of ``tiny-tsfm`` (defaults: the issue's patch 8, d 64, 2 layers, ~100 k parameters)."""

    patch_len: int = 8
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 256
    max_patches: int = 64
    dropout: float = 0.0

    def __post_init__(self) -> None:
        for name in ("patch_len", "d_model", "n_layers", "n_heads", "d_ff", "max_patches"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"TinyTSFMConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_heads={self.n_heads}")


class _Block(nn.Module):
    """Pre-norm transformer block with module projections (q, k, v, o, fc1, fc2)."""

    def __init__(self, config: TinyTSFMConfig) -> None:
        super().__init__()
        d = config.d_model
        self.n_heads = config.n_heads
        self.norm1 = nn.LayerNorm(d)
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.o = nn.Linear(d, d)
        self.norm2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, config.d_ff)
        self.fc2 = nn.Linear(config.d_ff, d)
        self.dropout = config.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows, n, d = x.shape
        h = self.norm1(x)
        heads = (rows, n, self.n_heads, d // self.n_heads)
        q = self.q(h).view(heads).transpose(1, 2)
        k = self.k(h).view(heads).transpose(1, 2)
        v = self.v(h).view(heads).transpose(1, 2)
        p = self.dropout if self.training else 0.0
        attn = F.scaled_dot_product_attention(q, k, v, dropout_p=p).transpose(1, 2).reshape(rows, n, d)
        x = x + self.o(attn)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class TinyTSFM(nn.Module):
    """MOMENT-style masked patch-reconstruction transformer, channel independent.

    Each channel is cut into patches of ``patch_len`` steps; masked patches are replaced by a learned
    mask token before the encoder; a linear head maps every hidden state back to its patch.
    """

    def __init__(self, config: TinyTSFMConfig | None = None) -> None:
        super().__init__()
        self.config = config or TinyTSFMConfig()
        c = self.config
        self.patch_len = c.patch_len
        self.d_model = c.d_model
        self.patch_embedding = nn.Linear(c.patch_len, c.d_model)
        self.position = nn.Parameter(torch.randn(c.max_patches, c.d_model) * 0.02)
        self.mask_token = nn.Parameter(torch.zeros(c.d_model))
        self.blocks = nn.ModuleList(_Block(c) for _ in range(c.n_layers))
        self.norm = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.patch_len)

    def patchify(self, series: torch.Tensor) -> torch.Tensor:
        """(batch, channels, length) -> (batch * channels, n_patches, patch_len)."""
        if series.dim() != 3:
            raise ValueError(f"series must be (batch, channels, length), got shape {tuple(series.shape)}")
        b, c, length = series.shape
        if length % self.patch_len:
            raise ValueError(f"series length {length} is not a multiple of patch_len={self.patch_len}")
        return series.reshape(b * c, length // self.patch_len, self.patch_len)

    def embed(self, patches: torch.Tensor) -> torch.Tensor:
        """Patch tokens before the encoder (no position, no mask): (rows, n, P) -> (rows, n, d)."""
        return self.patch_embedding(patches)

    def encode(self, patches: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Hidden states (rows, n, d); ``mask`` (rows, n) bool marks patches replaced by the mask token."""
        n = patches.shape[1]
        if n > self.config.max_patches:
            raise ValueError(f"{n} patches exceed max_patches={self.config.max_patches}")
        x = self.embed(patches)
        if mask is not None:
            x = torch.where(mask[..., None], self.mask_token.to(x.dtype), x)
        x = x + self.position[:n]
        for block in self.blocks:
            x = block(x)
        return self.norm(x)

    def reconstruct(self, hidden: torch.Tensor) -> torch.Tensor:
        """(rows, n, d) -> (rows, n, patch_len)."""
        return self.head(hidden)

    def forward(self, patches: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.reconstruct(self.encode(patches, mask))

    def adaptable_linears(self) -> dict[str, nn.Linear]:
        """The projections an adapter may wrap, by qualified name (``blocks.0.q`` ...)."""
        names = ("q", "k", "v", "o", "fc1", "fc2")
        return {f"blocks.{i}.{n}": getattr(b, n) for i, b in enumerate(self.blocks) for n in names}


def masked_patch_loss(
    model: TSBackbone, patches: torch.Tensor, mask_ratio: float, generator: torch.Generator
) -> torch.Tensor:
    """MOMENT's pretraining objective: MSE on the masked patches only."""
    mask = torch.rand(patches.shape[:2], generator=generator) < mask_ratio
    mask[mask.sum(1) == 0, 0] = True  # every row masks at least one patch
    recon = model.reconstruct(model.encode(patches, mask))
    return ((recon - patches) ** 2).mean(-1)[mask].mean()


# ---------------------------------------------------------------- generic pretraining corpus


def generic_corpus(n_series: int, length: int, seed: int) -> np.ndarray:
    """Synthetic univariate series of many shapes, each z-scored: (n_series, length) float32.

    Kinds (GutenTAG-like base oscillations plus stochastic processes): sine mixtures, square, sawtooth,
    AR(2), random walk, piecewise-constant levels, sparse bursts on noise; each with random amplitude,
    period, phase and noise.
    """
    rng = np.random.default_rng(seed)
    t = np.arange(length, dtype=np.float64)
    out = np.empty((n_series, length), dtype=np.float64)
    kinds = rng.integers(0, 7, n_series)
    for i, kind in enumerate(kinds):
        period = rng.uniform(6, 120)
        phase = rng.uniform(0, 2 * math.pi)
        noise = rng.uniform(0.0, 0.3)
        if kind == 0:
            k = rng.integers(1, 4)
            x = sum(
                rng.uniform(0.3, 1) * np.sin(2 * math.pi * t / (period / (j + 1)) + phase * j)
                for j in range(k)
            )
        elif kind == 1:
            x = np.sign(np.sin(2 * math.pi * t / period + phase))
        elif kind == 2:
            x = ((t / period + phase) % 1.0) * 2 - 1
        elif kind == 3:
            a1, a2 = rng.uniform(0.3, 1.6), 0.0
            a2 = rng.uniform(-0.95, min(0.95, 1 - abs(a1) - 0.02))
            e = rng.normal(size=length)
            x = np.zeros(length)
            for s in range(2, length):
                x[s] = a1 * x[s - 1] + a2 * x[s - 2] + e[s]
        elif kind == 4:
            x = np.cumsum(rng.normal(size=length))
        elif kind == 5:
            change = rng.random(length) < 1.0 / period
            x = np.cumsum(change * rng.normal(0, 1, length))
        else:
            x = (rng.random(length) < 0.02) * rng.uniform(1, 3, length)
            x = np.convolve(x, np.exp(-np.arange(10) / 3.0), mode="same")
        x = np.asarray(x, dtype=np.float64) + noise * rng.normal(size=length)
        out[i] = (x - x.mean()) / (x.std() + 1e-6)
    return out.astype(np.float32)


@dataclass(frozen=True)
class TSFMPretrainConfig:
    """Pretraining recipe of ``tiny-tsfm`` (fixed seed: the committed checkpoint is reproducible)."""

    seed: int = 0
    n_series: int = 4000
    series_length: int = 512
    window: int = 128
    steps: int = 2500
    batch_size: int = 128
    lr: float = 2e-3
    mask_ratio: float = 0.3
    eval_series: int = 200


def pretrain_tiny_tsfm(
    config: TSFMPretrainConfig | None = None, model_config: TinyTSFMConfig | None = None, log_every: int = 100
) -> tuple[TinyTSFM, dict]:
    """Pretrain ``tiny-tsfm`` by masked patch reconstruction on :func:`generic_corpus`.

    Returns the model and a log with the held-out masked-patch MSE of the model and of two references
    (predicting zero, i.e. the series mean, and linear interpolation between the neighbouring patches).
    """
    config = config or TSFMPretrainConfig()
    torch.manual_seed(config.seed)
    model = TinyTSFM(model_config)
    return model, masked_pretraining(model, config, asdict(model.config), log_every)


def masked_pretraining(model: Any, config: Any, model_info: dict, log_every: int = 100) -> dict:
    """Train ``model`` (any backbone with ``patchify`` and a masked forward) by masked patch reconstruction
    on :func:`generic_corpus` windows, as ``config`` (a pretraining recipe such as
    :class:`TSFMPretrainConfig`) says; returns the log with the held-out masked-patch MSE and references."""
    corpus = torch.from_numpy(generic_corpus(config.n_series, config.series_length, config.seed))
    held_out = torch.from_numpy(
        generic_corpus(config.eval_series, config.series_length, config.seed + 10_000)
    )
    held_out = held_out[:, : config.window]
    generator = torch.Generator().manual_seed(config.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, config.lr, total_steps=config.steps, pct_start=0.1
    )
    log: dict = {"train_loss": [], "config": asdict(config), "model": model_info}
    start = time.perf_counter()
    for step in range(config.steps):
        rows = torch.randint(0, corpus.shape[0], (config.batch_size,), generator=generator)
        offsets = torch.randint(
            0, config.series_length - config.window + 1, (config.batch_size,), generator=generator
        )
        idx = offsets[:, None] + torch.arange(config.window)
        # windows of series z-scored as a whole (no per-window renormalisation): a detector standardises
        # each channel with training statistics, so windows keep their offset and scale
        batch = corpus[rows[:, None], idx]
        loss = masked_patch_loss(model, model.patchify(batch[:, None]), config.mask_ratio, generator)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % log_every == 0 or step == config.steps - 1:
            log["train_loss"].append((step, loss.item()))
    log["train_seconds"] = time.perf_counter() - start
    log["evaluation"] = evaluate_masked_reconstruction(model, held_out, config.mask_ratio, config.seed)
    log["n_parameters"] = sum(p.numel() for p in model.parameters())
    return log


@torch.no_grad()
def evaluate_masked_reconstruction(
    model: TinyTSFM, series: torch.Tensor, mask_ratio: float, seed: int
) -> dict:
    """Held-out masked-patch MSE of the model versus the mean and linear-interpolation references."""
    model.eval()
    patches = model.patchify(series[:, None])
    generator = torch.Generator().manual_seed(seed)
    mask = torch.rand(patches.shape[:2], generator=generator) < mask_ratio
    mask[:, 0] = False
    mask[:, -1] = False  # interpolation needs both neighbours' edges
    recon = model(patches, mask)
    model_mse = float(((recon - patches) ** 2).mean(-1)[mask].mean())
    zero_mse = float((patches**2).mean(-1)[mask].mean())
    # linear interpolation from the last observed value before to the first after each masked run
    flat = series.clone()
    steps = torch.arange(series.shape[1], dtype=torch.float32)
    step_mask = mask.repeat_interleave(model.patch_len, dim=1)
    for r in range(series.shape[0]):
        known = ~step_mask[r]
        flat[r] = torch.from_numpy(np.interp(steps.numpy(), steps[known].numpy(), series[r, known].numpy()))
    interp = model.patchify(flat[:, None])
    interp_mse = float(((interp - patches) ** 2).mean(-1)[mask].mean())
    return {"masked_mse": model_mse, "mean_predictor_mse": zero_mse, "interpolation_mse": interp_mse}


def save_tiny_tsfm(model: TinyTSFM, log: dict, directory: Path = CHECKPOINT_DIR) -> None:
    """Write ``model.pt`` (state dict), ``config.json`` and ``training_log.json``."""
    directory.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), directory / "model.pt")
    (directory / "config.json").write_text(json.dumps(asdict(model.config), indent=2) + "\n")
    (directory / "training_log.json").write_text(json.dumps(log, indent=1) + "\n")


def load_tiny_tsfm(directory: Path | str = CHECKPOINT_DIR) -> TinyTSFM:
    """The committed ``tiny-tsfm`` checkpoint, frozen and in eval mode.

    Raises ``FileNotFoundError`` naming the command that rebuilds it when the files are missing.
    """
    directory = Path(directory)
    weights, config_file = directory / "model.pt", directory / "config.json"
    if not weights.is_file() or not config_file.is_file():
        raise FileNotFoundError(
            f"tiny-tsfm checkpoint missing in {directory}: "
            "rebuild it with `python -m neurips26.methods.star.tsfm train`"
        )
    model = TinyTSFM(TinyTSFMConfig(**json.loads(config_file.read_text())))
    model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m neurips26.methods.star.tsfm", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="pretrain tiny-tsfm and write its checkpoint")
    train.add_argument("--steps", type=int, default=TSFMPretrainConfig.steps)
    train.add_argument("--out", type=Path, default=CHECKPOINT_DIR)
    args = parser.parse_args(argv)
    model, log = pretrain_tiny_tsfm(TSFMPretrainConfig(steps=args.steps))
    save_tiny_tsfm(model, log, args.out)
    print(json.dumps({k: log[k] for k in ("evaluation", "n_parameters", "train_seconds")}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
