"""Robotics kernels (KernelBench form), each with its hand MAC formula."""

from __future__ import annotations

import torch
from torch import nn


class ForwardKinematics(nn.Module):
    """Batched chain of 4x4 homogeneous transforms: ``T = T_1 T_2 ... T_J``."""

    def forward(self, transforms: torch.Tensor) -> torch.Tensor:  # [B, J, 4, 4]
        pose = transforms[:, 0]
        for j in range(1, transforms.shape[1]):
            pose = pose @ transforms[:, j]
        return pose


class KalmanUpdate(nn.Module):
    """Batched measurement update.

    ``S = H P Hᵀ + R``, ``K = P Hᵀ S⁻¹``, ``x += K(z - Hx)``, ``P -= K H P``.
    """

    def forward(
        self, x: torch.Tensor, p: torch.Tensor, h: torch.Tensor, r: torch.Tensor, z: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        pht = p @ h.transpose(-1, -2)  # [B, n, m]
        s = h @ pht + r  # [B, m, m]
        k = torch.linalg.solve(s, pht.transpose(-1, -2)).transpose(-1, -2)  # [B, n, m]
        innovation = z - (h @ x.unsqueeze(-1)).squeeze(-1)
        x_new = x + (k @ innovation.unsqueeze(-1)).squeeze(-1)
        p_new = p - k @ (h @ p)
        return x_new, p_new


class MPCRollout(nn.Module):
    """Linear dynamics rollout ``x_{t+1} = A x_t + B u_t`` over a horizon, batched over candidate plans."""

    def __init__(self, n: int, m: int) -> None:
        super().__init__()
        self.a = nn.Parameter(torch.eye(n) + 0.01 * torch.randn(n, n))
        self.b = nn.Parameter(0.1 * torch.randn(n, m))

    def forward(self, x0: torch.Tensor, u: torch.Tensor) -> torch.Tensor:  # x0 [P, n], u [P, T, m]
        x = x0
        states = []
        for t in range(u.shape[1]):
            x = x @ self.a.T + u[:, t] @ self.b.T
            states.append(x)
        return torch.stack(states, dim=1)


class PairwiseDistances(nn.Module):
    """Squared distances ``|x_i|² + |y_j|² - 2 x_i·y_j`` between two point clouds."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # [N, 3], [M, 3]
        return (x * x).sum(-1, keepdim=True) + (y * y).sum(-1) - 2 * x @ y.T


def _kalman_macs(b: int, n: int, m: int) -> int:
    # P Hᵀ, H (P Hᵀ), LU solve (m³/3 + m²·n), H x, K·innov, H P, K (H P)
    return b * (n * n * m + m * n * m + m**3 // 3 + m * m * n + m * n + n * m + m * n * n + n * m * n)


PROGRAMS = [
    dict(
        name="forward_kinematics",
        model=ForwardKinematics,
        inputs=lambda: [torch.randn(4096, 7, 4, 4)],
        macs=6 * 4096 * 64,
    ),
    dict(
        name="kalman_update",
        model=KalmanUpdate,
        inputs=lambda: [
            torch.randn(1024, 6),
            torch.eye(6).expand(1024, 6, 6).clone(),
            torch.randn(1024, 3, 6),
            torch.eye(3).expand(1024, 3, 3).clone(),
            torch.randn(1024, 3),
        ],
        macs=_kalman_macs(1024, 6, 3),
    ),
    dict(
        name="mpc_rollout",
        model=MPCRollout,
        init=(8, 2),
        inputs=lambda: [torch.randn(1024, 8), torch.randn(1024, 32, 2)],
        macs=32 * 1024 * (8 * 8 + 8 * 2),
    ),
    dict(
        name="pairwise_distances",
        model=PairwiseDistances,
        inputs=lambda: [torch.randn(2048, 3), torch.randn(1024, 3)],
        macs=2048 * 1024 * 3,
    ),
]
