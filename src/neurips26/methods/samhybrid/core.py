"""Sharpness-aware minimisation with a per-group radius, and Hessian sharpness by power iteration.

Paper: *Sharpness-Aware Hybrid Model Learning for Architecture-Agnostic Parameter Estimation*
(Takeishi, NeurIPS 2026). SAM (Foret et al., 2021) minimises the worst-case loss in a ball around the
weights::

    min_w max_{||e|| <= rho} L(w + e),   e*(w) = rho * g / ||g||,   g = grad L(w)

For hybrid models the ball is taken over the *ML* parameters only (``rho_physics = 0``): flatness with
respect to the flexible part favours a simple ML part, so it cannot quietly absorb the physics (Occam's
razor). The norm ``||g||`` is therefore computed over the perturbed groups only.
ASAM (Kwon et al., 2021) rescales by |w|: ``e = rho * w^2 g / ||w g||``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from neurips26.core.validation import check_choice, check_positive
from neurips26.methods.samhybrid.config import ASCENTS, SAMHybridConfig

ParamsOrGroups = Iterable[torch.Tensor] | Iterable[dict[str, Any]]
# Every default of the optimizer has one home, the config: the API and the experiment cannot disagree.
_DEFAULTS = SAMHybridConfig()


class SAMHybrid(torch.optim.Optimizer):
    """SAM whose perturbation radius is set per parameter group (``rho_physics=0`` spares the physics).

    Parameters
    ----------
    params:
        Tensors or parameter groups. A group may carry ``role="physics"`` (its radius defaults to
        ``rho_physics``) or ``role="ml"`` (default radius ``rho``), or an explicit ``rho``.
        ``HybridModel.param_groups()`` returns such groups.
    base_optimizer:
        The optimizer class that takes the descent step (e.g. ``torch.optim.Adam``).
    rho:
        Radius of the ML groups (default ``SAMHybridConfig.rho``; see the README on choosing it).
    rho_physics:
        Radius of the physics groups (default ``SAMHybridConfig.rho_physics`` = 0: the paper's hybrid
        adaptation as we read it). Groups added later with ``add_param_group`` get their role's radius too.
    adaptive:
        ASAM's scale-invariant ball (``e = rho * w^2 g / ||w g||``).
    ascent:
        ``"gradient"`` (SAM: the ascent direction is the gradient) or ``"random"`` (a random direction
        drawn from the global torch generator, scaled to the same radius: the negative control that keeps
        the perturbation's size and drops its sharpness-awareness).
    perturb_eps:
        Added to the norm of the ascent direction (guards a zero gradient).
    **base_kwargs:
        Passed to ``base_optimizer`` (``lr``, ``weight_decay``, ...).

    Use ``step(closure)`` with the PyTorch closure convention (as ``torch.optim.LBFGS`` documents): the
    closure clears the gradients, runs forward and backward, and returns the loss. It is called twice per
    step (at w and at w + e(w))::

        def closure():
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            return loss

        optimizer.step(closure)

    Or call ``first_step`` / ``second_step`` around your own second forward-backward. A closure that does
    not clear the gradients makes the first pass of each step add to the previous step's gradients.
    """

    def __init__(
        self,
        params: ParamsOrGroups,
        base_optimizer: type[torch.optim.Optimizer],
        rho: float = _DEFAULTS.rho,
        rho_physics: float = _DEFAULTS.rho_physics,
        adaptive: bool = _DEFAULTS.adaptive,
        perturb_eps: float = _DEFAULTS.perturb_eps,
        ascent: str = _DEFAULTS.ascent,
        **base_kwargs: Any,
    ) -> None:
        check_choice("ascent", ascent, ASCENTS)
        check_positive("rho", rho, allow_zero=True)
        check_positive("rho_physics", rho_physics, allow_zero=True)
        check_positive("perturb_eps", perturb_eps)
        if not (isinstance(base_optimizer, type) and issubclass(base_optimizer, torch.optim.Optimizer)):
            raise TypeError(f"base_optimizer must be a torch.optim.Optimizer class, got {base_optimizer!r}")
        self._rho_by_role = {"ml": rho, "physics": rho_physics}
        groups = _as_groups(params)
        # ``perturb_eps``, not ``eps``: group keys are shared with the base optimizer, and Adam reads ``eps``.
        defaults = {
            "rho": rho,
            "adaptive": adaptive,
            "perturb_eps": perturb_eps,
            "ascent": ascent,
            **base_kwargs,
        }
        super().__init__(groups, defaults)
        self.base_optimizer = base_optimizer(self.param_groups, **base_kwargs)
        self.param_groups = self.base_optimizer.param_groups  # one set of groups: lr changes reach both
        self.defaults.update(self.base_optimizer.defaults)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group; its radius defaults to its role's (``role="physics"`` -> ``rho_physics``)."""
        role = param_group.setdefault("role", "ml")
        if role not in ("ml", "physics"):
            raise ValueError(f"param group role must be 'ml' or 'physics', got {role!r}")
        param_group.setdefault("rho", self._rho_by_role[role])
        check_positive("group rho", param_group["rho"], allow_zero=True)
        super().add_param_group(param_group)

    @classmethod
    def from_config(
        cls,
        params: ParamsOrGroups,
        base_optimizer: type[torch.optim.Optimizer],
        config: SAMHybridConfig,
        **base_kwargs: Any,
    ) -> SAMHybrid:
        """``SAMHybrid`` with its settings from a ``SAMHybridConfig`` (``base_kwargs`` go to the base)."""
        if not isinstance(config, SAMHybridConfig):
            raise TypeError(f"config must be a SAMHybridConfig, got {type(config).__name__}")
        return cls(
            params,
            base_optimizer,
            rho=config.rho,
            rho_physics=config.rho_physics,
            adaptive=config.adaptive,
            perturb_eps=config.perturb_eps,
            ascent=config.ascent,
            **base_kwargs,
        )

    @torch.no_grad()
    def _ascent_directions(self) -> list[list[torch.Tensor | None]]:
        """Per group and parameter: the direction d to climb (g, or a random draw), None where no grad."""
        return [
            [
                None if p.grad is None else (p.grad if group["ascent"] == "gradient" else torch.randn_like(p))
                for p in group["params"]
            ]
            for group in self.param_groups
        ]

    @torch.no_grad()
    def _perturbed_norm(self, directions: list[list[torch.Tensor | None]]) -> torch.Tensor:
        """||d|| (or ||w d|| for ASAM) over the groups whose radius is positive."""
        norms = []
        for group, group_directions in zip(self.param_groups, directions, strict=True):
            if group["rho"] <= 0:
                continue
            scaled = [
                (p.abs() * d if group["adaptive"] else d)
                for p, d in zip(group["params"], group_directions, strict=True)
                if d is not None
            ]
            if scaled:
                norms.append(torch.linalg.vector_norm(torch.stack(torch._foreach_norm(scaled))))
        if not norms:
            return torch.zeros(())
        return torch.linalg.vector_norm(torch.stack(norms))

    @torch.no_grad()
    def first_step(self, zero_grad: bool = False) -> None:
        """Move to the worst case in the ball: w <- w + e(w); remembers w to restore it.

        e = rho * d / ||d|| with d = g (SAM), or e = rho * w^2 d / ||w d|| (ASAM); the norm spans the
        perturbed groups only, so the whole radius goes to them.
        """
        directions = self._ascent_directions()
        norm = self._perturbed_norm(directions)
        for group, group_directions in zip(self.param_groups, directions, strict=True):
            scale = group["rho"] / (norm + group["perturb_eps"])
            for p, d in zip(group["params"], group_directions, strict=True):
                if d is None:
                    continue
                self.state[p]["old_p"] = p.detach().clone()
                if group["rho"] <= 0:
                    continue
                e_w = (p.pow(2) if group["adaptive"] else 1.0) * d * scale.to(p)
                p.add_(e_w)
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad: bool = False) -> None:
        """Return to w and take the base optimizer's step with the gradient taken at w + e(w)."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None or "old_p" not in self.state[p]:
                    continue
                p.copy_(self.state[p].pop("old_p"))
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()

    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor:  # type: ignore[override]
        """One SAM step. ``closure`` clears the gradients, runs forward and backward and returns the loss
        (the PyTorch convention); it is called at w and at w + e(w). Returns the loss at w."""
        if closure is None:
            raise ValueError(
                "SAMHybrid.step needs a closure that clears the gradients, runs forward and backward "
                "and returns the loss"
            )
        closure = torch.enable_grad()(closure)
        loss = closure()
        self.first_step(zero_grad=True)
        closure()
        self.second_step()
        return loss

    def state_dict(self) -> dict[str, Any]:
        """The base optimizer's state (moments etc.); group radii travel in its ``param_groups``."""
        return self.base_optimizer.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.base_optimizer.load_state_dict(state_dict)
        self.param_groups = self.base_optimizer.param_groups


def _as_groups(params: ParamsOrGroups) -> list[dict[str, Any]]:
    items = list(params)
    if not items:
        raise ValueError("params is empty: SAMHybrid needs at least one parameter")
    if isinstance(items[0], dict):
        return [dict(group) for group in items]
    return [{"params": items}]


def top_hessian_eigenvalue(
    loss_fn: Callable[[dict[str, torch.Tensor]], torch.Tensor],
    params: dict[str, torch.Tensor],
    iterations: int = 20,
    seed: int = 0,
    tolerance: float = 1e-4,
) -> float:
    """Largest Hessian eigenvalue of ``loss_fn`` at ``params`` by power iteration on Hessian-vector products.

    HVPs are forward-over-reverse (``torch.func.jvp`` of ``torch.func.grad``), never a dense Hessian.
    The iteration stops early when the Rayleigh quotient changes by less than ``tolerance`` (relative).
    """
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    primals = {k: v.detach() for k, v in params.items()}
    generator = torch.Generator().manual_seed(seed)
    vector = {k: torch.randn(v.shape, generator=generator, dtype=v.dtype) for k, v in primals.items()}
    gradient = torch.func.grad(loss_fn)

    def hvp(v: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return torch.func.jvp(gradient, (primals,), (v,))[1]

    def normalised(v: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        norm = torch.sqrt(sum((x * x).sum() for x in v.values()))
        return {k: x / (norm + 1e-30) for k, x in v.items()}

    vector = normalised(vector)
    eigenvalue = 0.0
    for _ in range(iterations):
        product = hvp(vector)
        estimate = float(sum((product[k] * vector[k]).sum() for k in vector))
        vector = normalised(product)
        if abs(estimate - eigenvalue) <= tolerance * max(abs(estimate), 1e-12):
            return estimate
        eigenvalue = estimate
    return eigenvalue
