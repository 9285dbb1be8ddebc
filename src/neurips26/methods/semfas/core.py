"""SEM-FAS on plain tensors: states, coherent heads, the constrained POVM and the exact Born decomposition.

Notation (shapes): B samples, M modalities, K heads, C classes, d state dimension, r POVM rank.

- amplitude a_m = softplus(w_m . h_m + b_m), 0 when modality m is missing            [B, M]
- state psi_m = normalise(A_m h_m + i B_m h_m) in C^d (0 when missing)               [B, M, d]
- head k: Phi_k = sum_m beta_km a_m e^(i theta_km) psi_m = sum_m c_km psi_m,  Psi_k = Phi_k / |Phi_k|
- rho = sum_k pi_k |Psi_k><Psi_k|, pi = softmax                                       [B, d, d] (never formed
  on the hot path)
- E_c = F_c F_c^H with sum_c E_c <= I, E_perp = I - sum_c E_c;  P(c) = Tr(rho E_c)
- Born rule: P(c) = sum_k pi_k / |Phi_k|^2 sum_{m,n} conj(c_km) c_kn <psi_m|E_c|psi_n>
  = sum_m main_m(c) + sum_{m<n} 2 Re(...) (pairwise interference: synergy > 0, suppression < 0)

The hot path costs O(M d r + M^2 r) per class and O(K M d + K M^2) for the heads, i.e. within the
issue's O((K + M) d^2 + M^2 d) per class.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

EPS = 1e-12


def _squared_norm(x: Tensor) -> Tensor:
    """sum |x|^2 over the last axis (through real arithmetic: faster than complex norms on CPU)."""
    if x.is_complex():
        return x.real.square().sum(-1) + x.imag.square().sum(-1)
    return x.square().sum(-1)


def normalise_states(raw: Tensor, present: Tensor) -> Tensor:
    """Unit-normalise each modality's state and zero the missing ones.

    Parameters
    ----------
    raw : Tensor [B, M, d], real or complex
        ``A_m h_m + i B_m h_m`` (real in the phase-free ablation).
    present : Tensor [B, M] bool
        Which modalities each sample has.
    """
    norm = _squared_norm(raw).unsqueeze(-1).clamp_min(EPS).sqrt()
    return (raw / norm) * present.unsqueeze(-1).to(norm.dtype)


def head_coefficients(
    amplitude: Tensor, beta: Tensor, theta: Tensor | None, *, complex_phase: bool = True
) -> Tensor:
    """Coefficients c_km = beta_km a_m e^(i theta_km) of the coherent heads (step 2 of the issue).

    Parameters
    ----------
    amplitude : Tensor [B, M], real >= 0
    beta : Tensor [K, M], real
    theta : Tensor [K, M] or None
        Relative phases; ``None`` gives real coefficients beta_km a_m.
    complex_phase : bool, default True
        False keeps the coefficients real: c_km = beta_km a_m cos(theta_km), the real part of the phase
        factor (a signed weight, the only relative "phase" real states have). The phase-free ablation uses
        it so that its heads still differ: with ``theta=None`` every head starts at beta = 1 and gets the
        same gradient, so the heads stay identical and the mixture collapses to a pure state (issue #43:
        the ablation then removed phases *and* the mixture).

    Returns
    -------
    Tensor [B, K, M], complex when ``theta`` is given with ``complex_phase``, else real.
    """
    magnitude = beta.unsqueeze(0) * amplitude.unsqueeze(1)  # [B, K, M]
    if theta is None:
        return magnitude
    if not complex_phase:
        return magnitude * torch.cos(theta).unsqueeze(0)
    return magnitude * torch.polar(torch.ones_like(theta), theta).unsqueeze(0)


def povm_factors(raw_factors: Tensor) -> Tensor:
    """Factors F_c of the measurement E_c = F_c F_c^H with sum_c E_c <= I (step 3).

    Every A_c is rescaled by one scalar so that the largest eigenvalue of sum_c A_c A_c^H is 1: the
    remainder E_perp = I - sum_c E_c is PSD and is the coverage element.

    Parameters
    ----------
    raw_factors : Tensor [C, d, r], real or complex
    """
    gram = torch.einsum("cdr,cer->de", raw_factors, raw_factors.conj())  # S = sum_c A_c A_c^H
    top = torch.linalg.eigvalsh(gram)[-1].clamp_min(EPS)
    return raw_factors / top.sqrt()


def measurement_grams(states: Tensor, factors: Tensor, complete: bool = False) -> Tensor:
    """G[b, c, m, n] = <psi_m| E_c |psi_n> through the low-rank factors (O(M d r + M^2 r) per class).

    ``complete=True`` (the "no coverage element" ablation) measures with E_c + E_perp / C instead, so
    that sum_c E_c = I: the coverage remainder is shared equally among the classes (a state outside the
    learned subspaces reads as "any class"), through <psi_m|E_perp|psi_n> = <psi_m|psi_n> - sum_c G_c.

    Parameters
    ----------
    states : Tensor [B, M, d]
    factors : Tensor [C, d, r]
    """
    projected = torch.einsum("cdr,bmd->bcmr", factors.conj(), states)  # F_c^H psi_m
    grams = torch.einsum("bcmr,bcnr->bcmn", projected.conj(), projected)
    if complete:
        overlap = torch.einsum("bmd,bnd->bmn", states.conj(), states).unsqueeze(1)
        grams = grams + (overlap - grams.sum(1, keepdim=True)) / factors.shape[0]
    return grams


@dataclass
class BornMeasurement:
    """The result of measuring the mixed state: exact probabilities, their decomposition, the heads.

    Attributes
    ----------
    born : Tensor [B, C]       P(c) = Tr(rho E_c)
    main_effects : [B, C, M]   sum_k pi_k |c_km|^2 <psi_m|E_c|psi_m> / |Phi_k|^2
    pairwise : [B, C, M, M]    upper triangle (m < n): sum_k pi_k 2 Re(conj(c_km) c_kn <psi_m|E_c|psi_n>)
                               / |Phi_k|^2; zero on and below the diagonal, so that
                               born = main_effects.sum(-1) + pairwise.sum((-2, -1)) exactly
    head_states : [B, K, d]    Psi_k (unit vectors)
    head_weights : [K]         pi_k
    """

    born: Tensor
    main_effects: Tensor
    pairwise: Tensor
    head_states: Tensor
    head_weights: Tensor


def born_decomposition(
    states: Tensor, coefficients: Tensor, head_weights: Tensor, factors: Tensor, complete: bool = False
) -> BornMeasurement:
    """Measure rho = sum_k pi_k |Psi_k><Psi_k| with E_c and split every P(c) exactly (step 4).

    Parameters
    ----------
    states : Tensor [B, M, d]       psi_m (zero rows for missing modalities)
    coefficients : Tensor [B, K, M] c_km
    head_weights : Tensor [K]       pi_k (non-negative, summing to 1)
    factors : Tensor [C, d, r]      F_c with E_c = F_c F_c^H
    complete : bool                 share E_perp among the classes (see :func:`measurement_grams`)
    """
    phi = torch.einsum("bkm,bmd->bkd", coefficients, states)  # Phi_k
    norm2 = _squared_norm(phi)  # |Phi_k|^2  [B, K]
    norm2 = norm2.clamp_min(EPS)  # a head cancelled to zero contributes nothing (no division by 0)
    weight = head_weights.unsqueeze(0) / norm2  # pi_k / |Phi_k|^2  [B, K]
    # W[b, m, n] = sum_k w_bk conj(c_bkm) c_bkn : the head-mixed coefficient outer products
    outer = torch.einsum("bk,bkm,bkn->bmn", weight.to(coefficients.dtype), coefficients.conj(), coefficients)
    terms = measurement_grams(states, factors, complete) * outer.unsqueeze(1)  # [B, C, M, M]
    if terms.is_complex():
        terms = terms.real
    main = torch.diagonal(terms, dim1=-2, dim2=-1)  # |c_m|^2 <psi_m|E|psi_m> (real)
    upper = torch.triu(torch.ones(terms.shape[-1], terms.shape[-1], dtype=torch.bool), diagonal=1)
    pairwise = 2.0 * terms * upper.to(terms.device)  # 2 Re(...) for m < n
    born = main.sum(-1) + pairwise.sum((-2, -1))
    head_states = phi / norm2.sqrt().unsqueeze(-1).to(phi.dtype)
    return BornMeasurement(born, main, pairwise, head_states, head_weights)


def purity(head_states: Tensor, head_weights: Tensor) -> Tensor:
    """Tr(rho^2) = sum_{k,l} pi_k pi_l |<Psi_k|Psi_l>|^2 without forming rho ([B])."""
    overlaps = head_states.conj() @ head_states.transpose(-2, -1)  # <Psi_k|Psi_l>
    overlaps = overlaps.real.square() + overlaps.imag.square() if overlaps.is_complex() else overlaps.square()
    return torch.einsum("k,bkl,l->b", head_weights, overlaps, head_weights)


def density_matrix(head_states: Tensor, head_weights: Tensor) -> Tensor:
    """rho = sum_k pi_k |Psi_k><Psi_k| ([B, d, d]); PSD with trace 1 by construction."""
    return torch.einsum("k,bkd,bke->bde", head_weights.to(head_states.dtype), head_states, head_states.conj())


def von_neumann_entropy(rho: Tensor) -> Tensor:
    """S(rho) = -sum_i lambda_i log lambda_i from ``torch.linalg.eigvalsh`` ([B])."""
    values = torch.linalg.eigvalsh(rho).clamp_min(0.0)
    return -(values * torch.log(values.clamp_min(EPS))).sum(-1)


def calibrated_log_probs(born: Tensor, temperature: float | Tensor) -> Tensor:
    """log p(c) with p = P(c)^(1/T) / sum_c' P(c')^(1/T): P normalised, with temperature ([B, C])."""
    return F.log_softmax(torch.log(born.clamp_min(EPS)) / temperature, dim=-1)


def ambiguity(log_probs: Tensor) -> Tensor:
    """Predictive ambiguity: the entropy of p in nats ([B])."""
    return -(log_probs.exp() * log_probs).sum(-1)


def fit_temperature(log_scores: Tensor, labels: Tensor, steps: int = 50) -> float:
    """One temperature T minimising the NLL of softmax(log_scores / T) on held-out data (LBFGS on log T).

    Parameters
    ----------
    log_scores : Tensor [N, C]   log P(c) (or logits)
    labels : Tensor [N] int
    """
    log_t = torch.zeros((), requires_grad=True)
    optimiser = torch.optim.LBFGS([log_t], lr=0.5, max_iter=steps)
    scores, targets = log_scores.detach(), labels.detach().long()

    def closure() -> Tensor:
        optimiser.zero_grad()
        loss = F.cross_entropy(scores / log_t.exp(), targets)
        loss.backward()
        return loss

    optimiser.step(closure)
    temperature = float(log_t.detach().exp().clamp(0.05, 20.0))
    return temperature if math.isfinite(temperature) else 1.0  # a degenerate split keeps T = 1
