"""The deterministic in-process engine: all clients in one process, vectorised over clients with torch.func.

Models are flat parameter vectors (one row per model) run through :class:`FlatMLP`, so one ``vmap`` computes
every client's (and every target's) gradient at once. :func:`run_weighted` runs SP-CACW and the weighted
averaging baselines (uniform, oracle, sample-count) for one, several or all targets with the same weighting
code that the Flower strategy calls.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.func import vmap

from neurips26.methods.spcacw.batched import BiasEstimators, RoundLogs, batch_weights
from neurips26.methods.spcacw.config import SPCACWConfig
from neurips26.methods.spcacw.core import BiasEstimator, RoundRecord, choose_weights, within_client_variance
from neurips26.methods.spcacw.federated import ClientData, LinearFederation

try:  # the compiled round of the linear form; without numba the NumPy path (batched.py) runs
    from neurips26.methods.spcacw.kernels import linear_round, sq_distances
except ImportError:  # pragma: no cover - numba is in the fl extra
    linear_round = sq_distances = None

WEIGHT_RULES = ("bound", "uniform", "oracle", "samples", "local")


class FlatMLP:
    """A tanh MLP whose parameters are one flat vector, so ``vmap`` can batch over models.

    Parameters
    ----------
    sizes : layer widths, e.g. ``(64, 32, 10)``.
    """

    def __init__(self, sizes: Sequence[int]) -> None:
        if len(sizes) < 2 or min(sizes) < 1:
            raise ValueError(f"sizes must list >= 2 positive widths, got {tuple(sizes)!r}")
        self.sizes = tuple(int(s) for s in sizes)
        self.shapes = [(o, i) for i, o in zip(self.sizes[:-1], self.sizes[1:], strict=True)]
        self.n_params = sum(o * i + o for o, i in self.shapes)

    def init(self, n_models: int, generator: torch.Generator) -> torch.Tensor:
        """(n_models, P) parameters, PyTorch's default Linear initialisation (uniform +-1/sqrt(fan_in))."""
        parts = []
        for o, i in self.shapes:
            bound = 1.0 / math.sqrt(i)
            parts.append((torch.rand(n_models, o * i + o, generator=generator) * 2 - 1) * bound)
        return torch.cat(parts, dim=1)

    def forward(self, theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Logits (..., out) of one model ``theta`` (P,) on inputs ``x`` (..., in)."""
        offset = 0
        h = x
        for layer, (o, i) in enumerate(self.shapes):
            weight = theta[offset : offset + o * i].view(o, i)
            bias = theta[offset + o * i : offset + o * i + o]
            offset += o * i + o
            h = h @ weight.T + bias
            if layer < len(self.shapes) - 1:
                h = torch.tanh(h)
        return h

    def grouped_gradients(self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy gradients of every (model, micro-batch) pair by explicit backpropagation.

        ``theta`` (C, P), ``x`` (C, G, b, in), ``y`` (C, G, b) -> (C, G, P): model c's gradient on each of its
        G micro-batches. Batched einsums with no autograd graph: about 2x faster than ``vmap(grad)`` on
        these tiny layers (tests compare it with autograd).
        """
        c = theta.shape[0]
        weights, biases, offset = [], [], 0
        for o, i in self.shapes:
            weights.append(theta[:, offset : offset + o * i].view(c, o, i))
            biases.append(theta[:, offset + o * i : offset + o * i + o])
            offset += o * i + o
        activations = [x]
        h = x
        for layer, (weight, bias) in enumerate(zip(weights, biases, strict=True)):
            h = torch.einsum("cgbi,coi->cgbo", h, weight) + bias[:, None, None, :]
            if layer < len(weights) - 1:
                h = torch.tanh(h)
                activations.append(h)
        delta = torch.softmax(h, dim=-1)
        delta = delta - torch.nn.functional.one_hot(y, delta.shape[-1]).to(delta.dtype)
        delta = delta / y.shape[-1]
        parts: list[torch.Tensor] = []
        for layer in range(len(weights) - 1, -1, -1):
            below = activations[layer]
            grad_w = torch.einsum("cgbo,cgbi->cgoi", delta, below).flatten(2)
            parts.append(torch.cat([grad_w, delta.sum(2)], dim=-1))
            if layer > 0:
                delta = torch.einsum("cgbo,coi->cgbi", delta, weights[layer]) * (1 - below**2)
        return torch.cat(parts[::-1], dim=-1)

    def gradient_and_variance(
        self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor, groups: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each model's minibatch gradient and, from the same pass, the micro-batch estimate of its variance.

        ``theta`` (C, P), ``x`` (C, B, in), ``y`` (C, B) -> ``g`` (C, P) and ``s`` (C,), equal to
        :func:`~neurips26.methods.spcacw.core.within_client_variance` of the ``groups`` equal micro-batch
        gradients ``G_j`` (NaN when ``groups == 1``: the plain gradient, what FedAvg's clients run).
        With per-sample output deltas ``d_b`` (already divided by B) and inputs ``h_b`` of a layer,
        ``G_j - g = sum_b c_jb d_b [h_b, 1]^T`` with ``c_jb = m [b in j] - 1``, so
        ``sum_j ||G_j - g||^2 = sum_{b,b'} K_bb' M_bb'`` with ``K = (D D^T) * (H H^T + 1)`` (B x B, the
        ``+ 1`` is the bias) and ``M_bb' = m^2 [b, b' in one micro-batch] - m``: per layer two small Gram
        matrices and one mat-vec, ``O(B^2 (in + out))`` on top of the gradient's ``O(B in out)``, and no
        micro-batch gradient is ever formed.
        """
        c, batch = y.shape
        if batch % groups or groups < 1:
            raise ValueError(f"batch={batch} must be a multiple of groups={groups} >= 1")
        weights, biases, offset = [], [], 0
        for o, i in self.shapes:
            weights.append(theta[:, offset : offset + o * i].view(c, o, i))
            biases.append(theta[:, offset + o * i : offset + o * i + o])
            offset += o * i + o
        activations = [x]
        h = x
        for layer, (weight, bias) in enumerate(zip(weights, biases, strict=True)):
            h = torch.baddbmm(bias[:, None, :], h, weight.transpose(1, 2))
            if layer < len(weights) - 1:
                h = torch.tanh(h)
                activations.append(h)
        delta = torch.softmax(h, dim=-1)
        delta = (delta - torch.nn.functional.one_hot(y, delta.shape[-1]).to(delta.dtype)) / batch
        parts: list[torch.Tensor] = []
        spread = None
        mix = _group_contrast(batch, groups) if groups > 1 else None
        for layer in range(len(weights) - 1, -1, -1):
            below = activations[layer]
            parts.append(
                torch.cat([torch.bmm(delta.transpose(1, 2), below).flatten(1), delta.sum(1)], dim=-1)
            )
            if mix is not None:
                gram = torch.bmm(delta, delta.transpose(1, 2))
                gram *= torch.baddbmm(_ONE, below, below.transpose(1, 2))
                term = gram.view(c, -1) @ mix
                spread = term if spread is None else spread + term
            if layer > 0:
                delta = torch.bmm(delta, weights[layer]) * (1 - below * below)
        gradient = torch.cat(parts[::-1], dim=-1)
        if spread is None:
            return gradient, torch.full((c,), float("nan"), dtype=gradient.dtype)
        return gradient, (spread / (groups * (groups - 1))).clamp_min(0)

    def loss(self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy of one model on one batch."""
        return torch.nn.functional.cross_entropy(self.forward(theta, x), y)


_ONE = torch.ones(1, 1, 1)  # the bias column's contribution to a layer's input Gram matrix
_CONTRASTS: dict[tuple[int, int], torch.Tensor] = {}


def _group_contrast(batch: int, groups: int) -> torch.Tensor:
    """(B*B,) ``M_bb' = m^2 [b, b' in one micro-batch] - m`` (cached): ``sum_j ||G_j - g||^2 = <K, M>``."""
    key = (batch, groups)
    if key not in _CONTRASTS:
        group = torch.arange(batch) // (batch // groups)
        same = (group[:, None] == group[None, :]).float()
        _CONTRASTS[key] = (same * groups**2 - groups).reshape(-1)
    return _CONTRASTS[key]


@dataclass
class Kernels:
    """The vmapped gradient kernels of a model (built once per model)."""

    model: FlatMLP
    per_client: Callable = field(init=False)  # (C,P),(C,B,F),(C,B) -> (C,P), explicit backprop
    per_client_groups: Callable = field(init=False)  # (C,P),(C,m,B/m,F),(C,m,B/m) -> (C,m,P)
    loss_matrix: Callable = field(init=False)  # (M,P),(C,B,F),(C,B) -> (C,M) loss of every model per client

    def __post_init__(self) -> None:
        model = self.model
        self.per_client = lambda theta, x, y: model.gradient_and_variance(theta, x, y, 1)[0]
        self.per_client_groups = model.grouped_gradients
        per_model = vmap(self.model.loss, in_dims=(0, None, None))
        self.loss_matrix = vmap(per_model, in_dims=(None, 0, 0))


def weighted_accuracy(
    model: FlatMLP, theta: torch.Tensor, data: ClientData, clients: Sequence[int]
) -> np.ndarray:
    """Each listed client's test accuracy under its own label distribution; ``theta`` (len(clients), P)."""
    idx = torch.as_tensor(list(clients))
    with torch.no_grad():
        logits = vmap(model.forward)(theta, data.test_x[idx])
        correct = (logits.argmax(-1) == data.test_y[idx]).float()  # (C, n_test)
        labels = torch.nn.functional.one_hot(data.test_y[idx], logits.shape[-1]).float()  # (C, n_test, K)
        per_class = (correct[..., None] * labels).sum(1) / labels.sum(1).clamp_min(1)  # (C, K)
        weights = data.label_weights[idx]
        acc = (per_class * weights).sum(-1) / weights.sum(-1)
    return acc.numpy().astype(np.float64)


def split_groups(x: torch.Tensor, y: torch.Tensor, groups: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(C, B, F) -> (C, m, B/m, F): equal micro-batches of each client's minibatch."""
    c, b = y.shape
    if b % groups:
        raise ValueError(f"batch={b} must be a multiple of variance_groups={groups}")
    return x.reshape(c, groups, b // groups, -1), y.reshape(c, groups, b // groups)


@dataclass
class WeightedRun:
    """The result of :func:`run_weighted`: final target models, accuracy curve and the per-round logs."""

    theta: torch.Tensor  # (T, P)
    targets: list[int]
    curve: list[np.ndarray]  # accuracy of every target at each evaluation
    logs: dict[int, Sequence[RoundRecord]]  # a list, or a batched.TargetLog built on access
    solve_seconds: float = 0.0


def reference_weights(rule: str, data: ClientData, target: int) -> np.ndarray:
    """Fixed weights of the baselines: uniform, oracle (same concept, uniform), samples (FedAvg), local."""
    n = data.n_clients
    if rule == "uniform":
        return np.full(n, 1.0 / n)
    if rule == "oracle":
        same = (data.concept == data.concept[target]).numpy().astype(np.float64)
        return same / same.sum()
    if rule == "samples":
        counts = data.count.numpy().astype(np.float64)
        return counts / counts.sum()
    if rule == "local":
        out = np.zeros(n)
        out[target] = 1.0
        return out
    raise ValueError(f"rule={rule!r} is not allowed; choose one of {list(WEIGHT_RULES)}")


def client_updates(
    kernels: Kernels,
    theta: torch.Tensor,
    data: ClientData,
    config: SPCACWConfig,
    batch: int,
    generator: torch.Generator,
    with_variance: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every client's update at every target's model, with its variance (NaN when not ``with_variance``).

    ``theta`` (T, P). Gradient mode: ``g[t, i]`` is client i's minibatch gradient at ``theta[t]``. Delta
    mode: client i runs ``local_steps`` SGD steps from ``theta[t]`` and ``g[t, i] = (theta[t] - phi) /
    (K eta)``, with variance ``mean_k s_k / K`` (ours: K independent minibatches, drift ignored).

    Returns ``g`` (T, N, P) and ``s`` (T, N).
    """
    t, p = theta.shape
    n = data.n_clients
    # one target: every client starts from the same row (a stride-0 view, no copy; faster matmuls too)
    phi = theta.expand(n, p) if t == 1 else theta[:, None, :].expand(t, n, p).reshape(t * n, p)
    variances: torch.Tensor | None = None
    groups = config.variance_groups if with_variance else 1  # groups=1: the plain gradient, s = NaN
    for _ in range(config.local_steps):
        x, y = data.sample_batch(batch, generator)
        if t > 1:
            x, y = x.repeat(t, 1, 1), y.repeat(t, 1)
        step, s = kernels.model.gradient_and_variance(phi, x, y, groups)  # (T*N, P), (T*N,)
        if config.update == "gradient":
            return step.reshape(t, n, p), s.reshape(t, n)
        variances = s if variances is None else variances + s
        phi = phi - config.lr * step
    k = config.local_steps
    g = (theta[:, None, :] - phi.reshape(t, n, p)) / (k * config.lr)
    assert variances is not None  # local_steps >= 1
    return g, (variances / (k * k)).reshape(t, n)


def run_weighted(
    data: ClientData,
    model: FlatMLP,
    config: SPCACWConfig,
    *,
    rule: str = "bound",
    rounds: int,
    batch: int,
    seed: int,
    targets: Sequence[int] | None = None,
    eval_every: int = 10,
    theta0: torch.Tensor | None = None,
    vectorised: bool = True,
    compiled: bool = True,
) -> WeightedRun:
    """Train one model per target by weighted update averaging; ``rule="bound"`` is SP-CACW.

    Each round every client computes its update at every target's model (O(T N) client updates); each
    target's weights come from ``rule``; the target steps ``theta <- theta - eta sum_i alpha_i g_i``.
    With ``vectorised`` (default) SP-CACW's estimators and exact solve run for all targets in one step
    (``batched.BiasEstimators``, ``batched.batch_weights``, ``batched.RoundLogs``); ``vectorised=False`` (and
    ``solver="osqp"``) runs :func:`choose_weights` target by target, the reference the tests compare with.
    With ``compiled`` (default) and the linear bias form the vectorised step is one numba call
    (``kernels.linear_round``, equal to the NumPy path within rounding); ``compiled=False`` or no numba runs
    the NumPy path.
    """
    if rule not in WEIGHT_RULES:
        raise ValueError(f"rule={rule!r} is not allowed; choose one of {list(WEIGHT_RULES)}")
    targets = list(range(data.n_clients)) if targets is None else list(targets)
    for target in targets:
        if not 0 <= target < data.n_clients:
            raise ValueError(f"target {target} is not among the {data.n_clients} clients")
    generator = torch.Generator().manual_seed(seed)
    init = model.init(1, generator) if theta0 is None else theta0.reshape(1, -1)
    theta = init.expand(len(targets), -1).clone()
    kernels = Kernels(model)
    vectorised = vectorised and rule == "bound" and config.solver == "exact"
    if not vectorised and rule == "bound" and config.variance_every != 1:
        raise ValueError("the per-target reference loop (vectorised=False, or solver='osqp') needs "
                         f"variance_every=1, got {config.variance_every}")  # fmt: skip
    estimators = [BiasEstimator(data.n_clients, t, config.bias_decay) for t in targets]
    batched = BiasEstimators(data.n_clients, targets, config.bias_decay)
    round_logs = RoundLogs(targets, config.variance_scale, config.bias_form)
    own_index = torch.arange(len(targets)) * data.n_clients + torch.as_tensor(targets)  # rows of (T*N, P)
    fixed = {t: reference_weights(rule, data, t) for t in targets} if rule != "bound" else {}
    logs: dict[int, Sequence[RoundRecord]] = {t: [] for t in targets}
    if vectorised:
        logs = {t: round_logs.log(t) for t in targets}
    curve: list[np.ndarray] = []
    solve_seconds = 0.0
    for r in range(rounds):
        fresh = rule == "bound" and r % config.variance_every == 0  # fixed rules never use s
        g, s = client_updates(kernels, theta, data, config, batch, generator, with_variance=fresh)
        if vectorised:
            weights, all_valid, seconds = _bound_weights_all_targets(
                batched, round_logs, g, s if fresh else None, own_index, r, config, compiled
            )
            solve_seconds += seconds
            alpha = torch.from_numpy(weights.astype(np.float32))
        else:
            alpha, all_valid, seconds = _weights_target_by_target(
                rule, estimators, fixed, logs, g, s, r, config, targets
            )
            solve_seconds += seconds
        # theta <- theta - eta K sum_i alpha_i g_i in one call (delta mode: the whole averaged delta)
        step = g if all_valid else torch.nan_to_num(g)
        rate = -config.lr * config.local_steps
        theta = torch.baddbmm(theta[:, None], alpha[:, None], step, alpha=rate)[:, 0]
        if (r + 1) % eval_every == 0 or r == rounds - 1:
            curve.append(weighted_accuracy(model, theta, data, targets))
    return WeightedRun(theta, targets, curve, logs, solve_seconds)


def _weights_target_by_target(
    rule: str,
    estimators: list[BiasEstimator],
    fixed: dict[int, np.ndarray],
    logs: dict[int, Sequence[RoundRecord]],
    g: torch.Tensor,
    s: torch.Tensor,
    round_index: int,
    config: SPCACWConfig,
    targets: list[int],
) -> tuple[torch.Tensor, bool, float]:
    """The fixed rules' weights, or SP-CACW's by ``choose_weights`` target by target (the reference loop)."""
    valid_all = torch.isfinite(g.sum(-1))  # (T, N): NaN/inf anywhere in a client's update
    alpha = torch.empty(len(targets), g.shape[1])
    solve_seconds = 0.0
    for row, target in enumerate(targets):
        valid = valid_all[row].numpy()
        if rule != "bound":
            weights = fixed[target] * valid
            alpha[row] = torch.from_numpy(weights / weights.sum()).float()
            continue
        start = time.perf_counter()
        bias_sq = estimators[row].estimate()
        bias_sq[~valid] = np.inf  # a dropped reply gets no weight this round
        bias_sq[target] = 0.0  # a broken own update: the step zeroes it (nan_to_num), the solve keeps it
        if round_index < config.warmup_rounds:
            bias_sq = np.where(np.arange(g.shape[1]) == target, 0.0, np.inf)
        solution = choose_weights(
            estimators[row].variance(), bias_sq, scale=config.variance_scale,
            bias_form=config.bias_form, solver=config.solver, target=target,
        )  # fmt: skip
        solve_seconds += time.perf_counter() - start
        dropped = [int(i) for i in np.flatnonzero(~valid)]
        log = logs[target]
        assert isinstance(log, list)
        variance = estimators[row].variance()
        log.append(RoundRecord.from_solution(round_index, solution, bias_sq, variance, dropped))
        diff = g[row].double() - g[row, target].double()
        d = torch.linalg.vecdot(diff, diff).numpy()
        estimators[row].update(d, s[row].double().numpy(), valid)
        alpha[row] = torch.from_numpy(solution.alpha).float()
    return alpha, bool(valid_all.all()), solve_seconds


def _bound_weights_all_targets(
    estimators: BiasEstimators,
    logs: RoundLogs,
    g: torch.Tensor,
    s: torch.Tensor | None,
    own_index: torch.Tensor,
    round_index: int,
    config: SPCACWConfig,
    compiled: bool = True,
) -> tuple[np.ndarray, bool, float]:
    """SP-CACW's weights (T, N) of round ``round_index`` for every target at once, logged; estimators updated.

    ``s`` is None in a round without variance estimates. Returns the weights, whether every reply was valid
    and the seconds of the weight solve (estimates and exact solution).
    """
    t, n, p = g.shape
    use_kernel = compiled and linear_round is not None and config.bias_form == "linear"
    if use_kernel and g.dtype == torch.float32:
        d = sq_distances(g.numpy(), estimators.targets)  # float64 sums, one pass, no temporary
    else:  # the same in torch: each update minus its target's own, in float64
        gd = g.double()
        diff = gd - gd.view(t * n, p).index_select(0, own_index)[:, None, :]
        d = torch.linalg.vecdot(diff, diff).numpy()
    valid = np.isfinite(d)  # a finite distance needs finite updates of the client and of the target
    all_valid = bool(valid.all())
    if not all_valid:  # which replies are broken (NaN/inf anywhere), told apart from a broken target
        valid = torch.isfinite(g.sum(-1)).numpy()
    warmup = round_index < config.warmup_rounds
    if use_kernel:
        start = time.perf_counter()  # the whole call (estimates, solve and the estimators' update)
        s_np = d if s is None else s.numpy().astype(np.float64)
        e = estimators
        alpha, bias_sq, variance = linear_round(
            e.distance, e.noise, e.weight, e.spread, e.spread_weight, e.targets, d, s_np, s is not None,
            valid, e.decay, config.variance_scale, warmup,
        )  # fmt: skip
        solve = time.perf_counter() - start
        logs.append(round_index, alpha, bias_sq, variance, valid)
        return alpha, all_valid, solve
    start = time.perf_counter()
    variance = estimators.variance()
    bias_sq = estimators.estimate()
    if not all_valid:
        bias_sq[~valid] = np.inf  # a dropped reply gets no weight this round
        bias_sq[estimators.rows, estimators.targets] = 0.0  # a broken own update is zeroed by the step
    if warmup:
        bias_sq = np.full_like(bias_sq, np.inf)
        bias_sq[estimators.rows, estimators.targets] = 0.0
    alpha, _ = batch_weights(variance, bias_sq, config.variance_scale, config.bias_form)
    solve = time.perf_counter() - start
    logs.append(round_index, alpha, bias_sq, variance, valid)
    estimators.update(d, None if s is None else s.numpy(), valid, variance)
    return alpha, all_valid, solve


@dataclass
class SyntheticRun:
    """The result of :func:`run_synthetic`: final iterate, loss curve and the weights of every round."""

    x: torch.Tensor  # (d,)
    losses: list[float]
    alphas: np.ndarray  # (rounds, N)
    analytic: np.ndarray  # (rounds, N) the bound's optimum with the true zeta and sigma at each iterate


def run_synthetic(
    federation: LinearFederation,
    config: SPCACWConfig,
    *,
    rule: str = "bound",
    rounds: int,
    seed: int,
) -> SyntheticRun:
    """SP-CACW (``rule="bound"``) or a fixed rule on the streaming linear-regression federation (target 0).

    ``rule="analytic"`` uses the bound's optimum with the TRUE ``zeta_i^2`` and ``sigma_i^2(x)/b_i`` each
    round (an oracle no client has); every rule's weights are logged beside that optimum.
    """
    allowed = ("bound", "analytic", "uniform", "local")
    if rule not in allowed:
        raise ValueError(f"rule={rule!r} is not allowed; choose one of {list(allowed)}")
    if config.update != "gradient":
        raise ValueError("the synthetic federation runs in gradient mode (update='gradient')")
    generator = torch.Generator().manual_seed(seed)
    n, d = federation.n_clients, federation.dim
    x = torch.zeros(d, dtype=torch.float64)
    estimator = BiasEstimator(n, 0, config.bias_decay)
    true_bias = federation.true_bias_sq().numpy()
    losses, alphas, analytic = [], [], []
    for r in range(rounds):
        group = federation.group_gradients(x, config.variance_groups, generator)
        g, s = within_client_variance(group)
        s_np = s.numpy()
        best = choose_weights(
            federation.true_variance(x).numpy(),
            true_bias,
            scale=config.variance_scale,
            bias_form=config.bias_form,
        ).alpha
        if rule == "bound":
            bias_sq = estimator.estimate()
            if r < config.warmup_rounds:
                bias_sq = np.where(np.arange(n) == 0, 0.0, np.inf)
            alpha = choose_weights(
                estimator.variance(),
                bias_sq,
                scale=config.variance_scale,
                bias_form=config.bias_form,
                solver=config.solver,
            ).alpha
            estimator.update(((g - g[0]) ** 2).sum(-1).numpy(), s_np)
        elif rule == "analytic":
            alpha = best
        elif rule == "uniform":
            alpha = np.full(n, 1.0 / n)
        else:
            alpha = np.eye(n)[0]
        x = x - config.lr * (torch.from_numpy(alpha) @ g)
        losses.append(float(federation.target_loss(x)))
        alphas.append(alpha)
        analytic.append(best)
    return SyntheticRun(x, losses, np.asarray(alphas), np.asarray(analytic))
