"""SpRePE: Spherical Reflection Position Embedding -- Task B, shallow-water forecasting on the sphere.

A small transformer forecaster maps the state (height, vorticity, divergence) on a 32x64 Gauss-Legendre
grid to the state one interval later; every position embedding plugs into the same model. Scores follow
WeatherBench: latitude-weighted RMSE and the anomaly correlation coefficient (ACC) of the height field,
after 1 step and after an autoregressive rollout, plus the RMSE over the polar caps.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from neurips26.methods.sprepe.integration import SphericalPositionEmbedding
from neurips26.methods.sprepe.vit import Block, PatchEmbedding

__all__ = [
    "ForecastData",
    "SphericalForecaster",
    "anomaly_correlation",
    "latitude_weighted_rmse",
    "prepare_forecast_data",
    "rollout",
    "train_forecaster",
]


class SphericalForecaster(nn.Module):
    """One-step forecaster ``x_{t+1} = x_t + decode(transformer(patches(x_t)))`` for ``(B, C, H, W)`` fields.

    Patches are embedded by the ViT's stem (circular in longitude); tokens sit at ``token_xyz`` (the patch
    centres); the one position embedding is shared by all layers. A linear decoder, initialised at zero so
    the untrained model is persistence, maps each token back to its ``C x ph x pw`` patch increment.
    """

    def __init__(
        self,
        position_embedding: SphericalPositionEmbedding,
        token_xyz: Tensor,
        *,
        channels: int,
        height: int,
        width: int,
        patch_height: int,
        patch_width: int,
        dim: int,
        depth: int,
        num_heads: int,
        mlp_ratio: float = 2.0,
        stem_channels: int = 16,
    ) -> None:
        super().__init__()
        if token_xyz.shape != ((height // patch_height) * (width // patch_width), 3):
            raise ValueError(f"token_xyz has shape {tuple(token_xyz.shape)}; expected one row per patch")
        self.register_buffer("token_xyz", token_xyz)
        self.shape = (channels, height, width, patch_height, patch_width)
        self.patch_embed = PatchEmbedding(dim, patch_height, patch_width, stem_channels, in_channels=channels)
        self.position_embedding = position_embedding
        self.blocks = nn.ModuleList(
            Block(dim, num_heads, mlp_ratio, position_embedding) for _ in range(depth)
        )
        self.norm = nn.LayerNorm(dim)
        self.decode = nn.Linear(dim, channels * patch_height * patch_width)
        nn.init.zeros_(self.decode.weight)
        nn.init.zeros_(self.decode.bias)

    def forward(self, fields: Tensor) -> Tensor:
        channels, height, width, ph, pw = self.shape
        tokens = self.patch_embed(fields).flatten(2).transpose(1, 2)  # (B, T, dim), row-major patches
        tokens = self.position_embedding.embed_tokens(tokens, self.token_xyz)
        for block in self.blocks:
            tokens = block(tokens, self.token_xyz)
        patches = self.decode(self.norm(tokens))  # (B, T, C * ph * pw)
        rows, cols = height // ph, width // pw
        increment = patches.reshape(-1, rows, cols, channels, ph, pw).permute(0, 3, 1, 4, 2, 5)
        return fields + increment.reshape(-1, channels, height, width)


@dataclass(frozen=True)
class ForecastData:
    """Normalised train pairs and test trajectories, with what the scores need.

    ``train_inputs``/``train_targets``: ``(N, C, H, W)``; ``test``: ``(n_test, S, C, H, W)``; fields are
    normalised per channel by the training mean and std. ``climatology``: the training mean per channel
    and latitude ``(C, H, 1)`` (normalised), from which ACC anomalies are taken.
    """

    train_inputs: Tensor
    train_targets: Tensor
    test: Tensor
    mean: Tensor
    std: Tensor
    climatology: Tensor
    latitude_weights: Tensor
    polar_rows: Tensor


def prepare_forecast_data(
    fields: np.ndarray, lat: np.ndarray, latitude_weights: np.ndarray, n_train: int, polar_min_lat: float
) -> ForecastData:
    """Split trajectories ``(n, S, C, H, W)`` into the first ``n_train`` (train) and the rest (test)."""
    if not 0 < n_train < fields.shape[0]:
        raise ValueError(f"n_train={n_train} must lie in [1, {fields.shape[0] - 1}] (trajectories)")
    data = torch.from_numpy(fields).float()
    train, test = data[:n_train], data[n_train:]
    mean = train.mean(dim=(0, 1, 3, 4)).reshape(-1, 1, 1)
    std = train.std(dim=(0, 1, 3, 4)).reshape(-1, 1, 1)
    train, test = (train - mean) / std, (test - mean) / std
    return ForecastData(
        train_inputs=train[:, :-1].reshape(-1, *train.shape[2:]),
        train_targets=train[:, 1:].reshape(-1, *train.shape[2:]),
        test=test,
        mean=mean,
        std=std,
        climatology=train.mean(dim=(0, 1, 4)).unsqueeze(-1),
        latitude_weights=torch.from_numpy(latitude_weights).float(),
        polar_rows=torch.from_numpy(np.abs(lat) >= polar_min_lat),
    )


def latitude_weighted_rmse(prediction: Tensor, target: Tensor, weights: Tensor) -> Tensor:
    """RMSE per sample, ``sqrt(mean_{lat,lon} w(lat) (f - o)^2)`` with weights of mean 1 over latitudes.

    ``prediction``, ``target``: ``(..., H, W)``; ``weights``: ``(H,)``; returns ``(...)``.
    """
    weighted = (prediction - target).pow(2) * weights[:, None]
    return (weighted.mean(dim=(-2, -1)) / weights.mean()).sqrt()


def anomaly_correlation(prediction: Tensor, target: Tensor, climatology: Tensor, weights: Tensor) -> Tensor:
    """Latitude-weighted ACC per sample: sum w f'o' / sqrt(sum w f'^2 sum w o'^2), ' = minus climatology."""
    forecast, observed = prediction - climatology, target - climatology
    w = weights[:, None]
    numerator = (w * forecast * observed).sum(dim=(-2, -1))
    denominator = ((w * forecast.pow(2)).sum(dim=(-2, -1)) * (w * observed.pow(2)).sum(dim=(-2, -1))).sqrt()
    return numerator / denominator.clamp_min(1e-12)


def train_forecaster(
    model: SphericalForecaster,
    data: ForecastData,
    *,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    weight_decay: float,
    seed: int,
    progress: Any,
) -> None:
    """AdamW with 10% linear warm-up then cosine decay on the latitude-weighted one-step MSE."""
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=weight_decay)
    n = len(data.train_inputs)
    total = math.ceil(n / batch_size) * epochs
    warmup = max(1, total // 10)

    def learning_rate_factor(step: int) -> float:
        return min(1.0, (step + 1) / warmup) * 0.5 * (1.0 + math.cos(math.pi * step / total))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, learning_rate_factor)
    weights = data.latitude_weights[:, None]
    model.train()
    for _ in progress.loop(range(epochs), total=epochs, desc="epochs"):
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, batch_size):
            batch = order[start : start + batch_size]
            error = model(data.train_inputs[batch]) - data.train_targets[batch]
            loss = (error.pow(2) * weights).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()


@torch.no_grad()
def rollout(model: nn.Module, start: Tensor, steps: int) -> Tensor:
    """Autoregressive forecasts ``(B, steps, C, H, W)`` from ``start`` ``(B, C, H, W)``."""
    model.eval()
    states, state = [], start
    for _ in range(steps):
        state = model(state)
        states.append(state)
    return torch.stack(states, dim=1)


@torch.no_grad()
def forecast_scores(
    model: nn.Module, data: ForecastData, rollout_steps: int, channel: int = 0
) -> dict[str, float]:
    """Height-field RMSE (metres) and ACC after 1 step and after ``rollout_steps``, and polar-cap RMSE.

    Keys: ``{rmse, acc, rmse_polar}_{1step, rollout}``.

    Every test window of ``rollout_steps + 1`` snapshots is used; scores are averaged over windows.
    """
    snapshots = data.test.shape[1]
    if snapshots <= rollout_steps:
        raise ValueError(
            f"rollout_steps={rollout_steps} needs more than {snapshots} snapshots per trajectory"
        )
    starts = data.test[:, : snapshots - rollout_steps].reshape(-1, *data.test.shape[2:])
    truth = torch.stack(
        [data.test[:, k + 1 : snapshots - rollout_steps + k + 1] for k in range(rollout_steps)], dim=2
    ).reshape(-1, rollout_steps, *data.test.shape[2:])
    forecasts = rollout(model, starts, rollout_steps)
    scale = float(data.std[channel])  # back to metres for the height channel
    weights, polar = data.latitude_weights, data.polar_rows
    scores: dict[str, float] = {}
    for label, step in (("1step", 0), ("rollout", rollout_steps - 1)):
        prediction, target = forecasts[:, step, channel], truth[:, step, channel]
        scores[f"rmse_{label}"] = scale * float(latitude_weighted_rmse(prediction, target, weights).mean())
        scores[f"acc_{label}"] = float(
            anomaly_correlation(prediction, target, data.climatology[channel], weights).mean()
        )
        scores[f"rmse_polar_{label}"] = scale * float(
            latitude_weighted_rmse(prediction[:, polar], target[:, polar], weights[polar]).mean()
        )
    return scores


def timed_training(model: SphericalForecaster, data: ForecastData, progress: Any, **settings: Any) -> float:
    start = time.perf_counter()
    train_forecaster(model, data, progress=progress, **settings)
    return time.perf_counter() - start
