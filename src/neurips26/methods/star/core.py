"""STAR's three modules on tensors, and their peft-style injection into a frozen ``TSBackbone``.

"STAR: Boosting Time Series Foundation Models for Anomaly Detection through State-aware Adapter"
(Cheng et al., arXiv 2510.16014). The abstract names three modules; their internals are our design:

1. Identity-guided State Encoder: token q_{j,n} = E_id[j] + mean_{t in patch n} E_val[j, s_{j,t}];
   memory read r = softmax(q W_q M^T / sqrt(d)) M over M learnable slots; z = q + r; per-patch context
   c_n = mean_j GELU(W_c z_{j,n}) (a set function: no order among state variables).
2. Conditional Bottleneck Adapter on chosen frozen linears W: y = W x + (alpha / r) B diag(h(c)) A x with
   h(c) = W_h GELU(c_n + e_ch) + b_h (e_ch a numeric-channel identity; b_h = 1 at init) and B = 0 at
   init, so training starts from the backbone exactly.
3. Numeral-State Matching: from the frozen patch tokens of the numeric channels (plus a channel
   identity), a head predicts each state variable's distribution per patch as a dot product with that
   variable's state embeddings; its output layer starts at zero (uniform predictions).

Shapes: numeric (B, C, L) with L a multiple of the patch length P; codes (B, S, L) int64 in
[0, V_j] where V_j (one past the vocabulary) is the "unknown value" slot; N = L / P patches.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from neurips26.methods.star.config import STARConfig
from neurips26.methods.star.tsfm import TSBackbone

__all__ = [
    "ConditionalBottleneckLinear",
    "IdentityGuidedStateEncoder",
    "MaskedPatchReconstructor",
    "NumeralStateMatching",
    "STARModel",
    "StateContext",
    "inject_star",
]


class StateContext:
    """Holds the per-row state context that every injected adapter of one model reads."""

    def __init__(self) -> None:
        self.value: torch.Tensor | None = None  # (B, channels, n_patches, context_dim)
        self.layout: tuple[int, int] = (1, 1)  # rows = groups x B x channels, in that order


class ConditionalBottleneckLinear(nn.Module):
    """A frozen ``nn.Linear`` plus the state-conditioned low-rank update B diag(h(c)) A.

    Without a context (``holder.value is None``) or with ``conditional=False`` the gate is the static
    vector b_h, and the module is a LoRA layer with up-projection B diag(b_h).
    """

    def __init__(
        self,
        base: nn.Linear,
        rank: int,
        alpha: float,
        context_dim: int,
        holder: StateContext,
        conditional: bool,
    ) -> None:
        super().__init__()
        self.base = base
        self.rank = rank
        self.scaling = alpha / rank
        self.holder = holder
        self.conditional = conditional
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # LoRA's initialisation of A
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank))  # B = 0: start at the backbone
        self.gate_bias = nn.Parameter(torch.ones(rank))
        self.gate = nn.Linear(context_dim, rank, bias=False) if conditional else None
        if self.gate is not None:
            nn.init.normal_(self.gate.weight, std=0.02)

    def gate_values(self) -> torch.Tensor:
        """h(c): (B, channels, n, rank), or the static (rank,) gate."""
        context = self.holder.value
        if self.gate is None or context is None:
            return self.gate_bias
        return self.gate(context) + self.gate_bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        low = F.linear(x, self.lora_A)  # A x: (rows, n, rank)
        gate = self.gate_values()
        if gate.dim() == 1:
            low = low * gate
        else:  # broadcast each (window, channel) gate over the mask groups, without copies
            groups = self.holder.layout[0]
            shape = low.shape
            low = (low.view(groups, *gate.shape) * gate[None]).view(shape)
        return self.base(x) + self.scaling * F.linear(low, self.lora_B)  # + B diag(h(c)) A x


class IdentityGuidedStateEncoder(nn.Module):
    """State tokens and a per-patch state context from the codes of S state variables."""

    def __init__(self, vocab_sizes: tuple[int, ...], config: STARConfig) -> None:
        super().__init__()
        self.vocab_sizes = tuple(int(v) for v in vocab_sizes)
        d = config.state_dim
        self.use_memory = config.use_memory
        n_states = len(self.vocab_sizes)
        offsets = torch.tensor([0, *[v + 1 for v in self.vocab_sizes]]).cumsum(0)
        self.register_buffer("offsets", offsets[:-1].clone(), persistent=False)
        self.identity = nn.Parameter(torch.randn(n_states, d) / math.sqrt(d))
        self.values = nn.Parameter(torch.randn(int(offsets[-1]), d) / math.sqrt(d))
        with torch.no_grad():  # each variable's "unknown value" slot carries no value information
            self.values[offsets[1:] - 1] = 0.0
        self.memory = nn.Parameter(torch.randn(config.memory_slots, d) / math.sqrt(d))
        self.query = nn.Linear(d, d, bias=False)
        self.to_context = nn.Linear(d, config.context_dim)
        self.context_dim = config.context_dim

    def value_embeddings(self, codes: torch.Tensor) -> torch.Tensor:
        """(B, S, L) codes -> (B, S, L, d) value embeddings (each variable its own table)."""
        return self.values[codes + self.offsets[None, :, None]]

    def forward(self, codes: torch.Tensor, patch_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        b, s, length = codes.shape
        n = length // patch_len
        if s == 0:
            zeros = self.identity.new_zeros((b, n, self.context_dim))
            return self.identity.new_zeros((b, 0, n, self.identity.shape[1])), zeros
        values = self.value_embeddings(codes).reshape(b, s, n, patch_len, -1).mean(3)
        tokens = self.identity[None, :, None, :] + values  # q_{j,n}
        if self.use_memory:
            scores = self.query(tokens) @ self.memory.T / math.sqrt(self.memory.shape[1])
            tokens = tokens + scores.softmax(-1) @ self.memory  # z = q + read(M)
        context = F.gelu(self.to_context(tokens)).mean(1)  # set function over variables: (B, N, dc)
        return tokens, context


class NumeralStateMatching(nn.Module):
    """Predicts each state variable's distribution per patch from the numeric channels' patch tokens."""

    def __init__(self, n_numeric: int, d_model: int, config: STARConfig) -> None:
        super().__init__()
        d = config.state_dim
        self.channel = nn.Parameter(torch.randn(n_numeric, d) / math.sqrt(d))
        self.project = nn.Linear(d_model, d)
        self.temporal = nn.Conv1d(d, d, kernel_size=3, padding=1)
        self.out = nn.Linear(d, d, bias=False)
        nn.init.zeros_(self.out.weight)  # uniform predictions at init: the NLL term starts constant

    def forward(self, patch_tokens: torch.Tensor, encoder: IdentityGuidedStateEncoder) -> torch.Tensor:
        """patch_tokens (B, C, N, d_model) -> log-probabilities (B, S, N, V_max); -inf past a vocabulary."""
        summary = F.gelu(self.project(patch_tokens) + self.channel[None, :, None, :]).mean(1)  # (B, N, d)
        summary = F.gelu(self.temporal(summary.transpose(1, 2))).transpose(1, 2)
        query = self.out(summary)  # (B, N, d)
        v_max = max(encoder.vocab_sizes)
        index = torch.arange(v_max, device=query.device)
        valid = index[None, :] < torch.tensor(encoder.vocab_sizes, device=query.device)[:, None]  # (S, V)
        rows = encoder.offsets[:, None] + index.clamp_max(v_max - 1)[None, :]
        rows = torch.where(valid, rows, encoder.offsets[:, None])
        keys = encoder.identity[:, None, :] + encoder.values[rows]  # (S, V, d)
        logits = torch.einsum("bnd,svd->bsnv", query, keys) / math.sqrt(keys.shape[-1])
        logits = logits.masked_fill(~valid[None, :, None, :], float("-inf"))
        return logits.log_softmax(-1)


class MaskedPatchReconstructor(nn.Module):
    """Scores a series by masked patch reconstruction with a backbone (the shared scoring path).

    Subclasses provide ``context`` (a per-patch context for the adapters, or None), ``_reconstruct`` and
    ``state_nll``; STAR and the backbone baselines then score windows the same way.
    """

    backbone: TSBackbone

    def context(self, codes: torch.Tensor) -> torch.Tensor | None:
        return None

    def state_nll(self, numeric: torch.Tensor, codes: torch.Tensor) -> torch.Tensor | None:
        return None

    def _reconstruct(
        self,
        patches: torch.Tensor,
        context: torch.Tensor | None,
        mask: torch.Tensor,
        layout: tuple[int, int] = (1, 1),
    ) -> torch.Tensor:
        return self.backbone.reconstruct(self.backbone.encode(patches, mask))

    def forward(
        self, numeric: torch.Tensor, codes: torch.Tensor, mask_groups: int = 4
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Per-step squared reconstruction error (B, C, L) and state NLL (B, S, L) (None without matching).

        Each patch is reconstructed while masked: patch n is masked in pass n mod ``mask_groups``; the
        passes run as one batch.
        """
        b, c, length = numeric.shape
        p = self.backbone.patch_len
        n = length // p
        patches = self.backbone.patchify(numeric)  # (B*C, N, P)
        context = self.context(codes)  # (B, N, dc) or None
        groups = max(1, min(mask_groups, n))
        group_of = torch.arange(n, device=numeric.device) % groups
        masks = group_of[None, :] == torch.arange(groups, device=numeric.device)[:, None]  # (G, N)
        rows = patches.shape[0]
        stacked = patches.repeat(groups, 1, 1)
        mask = masks.repeat_interleave(rows, 0)
        recon = self._reconstruct(stacked, context, mask, (groups, c)).view(groups, rows, n, p)
        recon = recon.gather(0, group_of.view(1, 1, n, 1).expand(1, rows, n, p))[0]
        error = ((recon - patches) ** 2).reshape(b, c, length)
        return error, self.state_nll(numeric, codes)

    def training_loss(
        self, numeric: torch.Tensor, codes: torch.Tensor, mask_ratio: float, generator: torch.Generator
    ) -> torch.Tensor:
        """Masked patch MSE (MOMENT's objective), plus the state NLL where a matching head exists."""
        c = numeric.shape[1]
        patches = self.backbone.patchify(numeric)
        context = self.context(codes)
        mask = torch.rand(patches.shape[:2], generator=generator) < mask_ratio
        mask[mask.sum(1) == 0, 0] = True
        recon = self._reconstruct(patches, context, mask, (1, c))
        loss = ((recon - patches) ** 2).mean(-1)[mask].mean()
        nll = self.state_nll(numeric, codes)
        weight = getattr(getattr(self, "config", None), "matching_weight", 1.0)
        if nll is not None and weight > 0:
            loss = loss + weight * nll.mean()
        return loss

    def trainable_parameters(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.requires_grad]


class STARModel(MaskedPatchReconstructor):
    """A frozen backbone with STAR's adapters injected, plus the state encoder and the matching head."""

    def __init__(
        self, backbone: TSBackbone, config: STARConfig, n_numeric: int, vocab_sizes: tuple[int, ...]
    ):
        super().__init__()
        if not isinstance(backbone, nn.Module) or not isinstance(backbone, TSBackbone):
            raise TypeError(
                f"backbone must be an nn.Module implementing TSBackbone, got {type(backbone).__name__}"
            )
        if n_numeric < 1:
            raise ValueError(f"n_numeric must be >= 1, got {n_numeric}")
        if any(int(v) < 1 for v in vocab_sizes):
            raise ValueError(f"every vocabulary needs >= 1 value, got sizes {tuple(vocab_sizes)}")
        self.config = config
        self.backbone = backbone
        for p in backbone.parameters():
            p.requires_grad_(False)
        self.holder = StateContext()
        self.adapters = nn.ModuleDict()
        linears = backbone.adaptable_linears()
        chosen = [name for name in linears if name.rsplit(".", 1)[-1] in config.target_modules]
        if not chosen:
            raise ValueError(
                f"target_modules={config.target_modules} match none of the backbone's linears "
                f"{sorted(linears)}"
            )
        conditional = config.use_conditioning and len(vocab_sizes) > 0
        for name in chosen:
            parent_name, _, attr = name.rpartition(".")
            parent = backbone.get_submodule(parent_name)
            wrapped = ConditionalBottleneckLinear(
                linears[name], config.rank, config.alpha, config.context_dim, self.holder, conditional
            )
            setattr(parent, attr, wrapped)
            self.adapters[name.replace(".", "_")] = wrapped
        self.encoder = IdentityGuidedStateEncoder(tuple(vocab_sizes), config)
        self.matching = (
            NumeralStateMatching(n_numeric, backbone.d_model, config)
            if config.use_matching and len(vocab_sizes) > 0
            else None
        )
        self.n_numeric = n_numeric
        # the backbone is channel independent: a channel identity lets the generated update differ per
        # sensor (flow must be zero under a closed valve, a level need not)
        self.channel_identity = nn.Parameter(torch.randn(n_numeric, config.context_dim) * 0.1)

    def context(self, codes: torch.Tensor) -> torch.Tensor:
        """The per-patch state context c (B, N, context_dim) of the Identity-guided State Encoder."""
        return self.encoder(codes, self.backbone.patch_len)[1]

    def _reconstruct(
        self,
        patches: torch.Tensor,
        context: torch.Tensor | None,
        mask: torch.Tensor,
        layout: tuple[int, int] = (1, 1),
    ) -> torch.Tensor:
        """Masked reconstruction of (rows, N, P) patches; rows = groups x windows x channels (``layout``)
        and each window's context (B, N, dc) is set on the adapters."""
        if context is not None:  # (B, N, dc) -> per window and channel (B, C, N, dc)
            context = F.gelu(context[:, None] + self.channel_identity[None, :, None])
        self.holder.value = context
        self.holder.layout = layout
        try:
            return self.backbone.reconstruct(self.backbone.encode(patches, mask))
        finally:
            self.holder.value = None

    def state_nll(self, numeric: torch.Tensor, codes: torch.Tensor) -> torch.Tensor | None:
        """-log p(s_{j,t} | numeric patch) per step (B, S, L); an unknown value gets its largest NLL."""
        if self.matching is None:
            return None
        b, c, length = numeric.shape
        p = self.backbone.patch_len
        tokens = self.backbone.embed(self.backbone.patchify(numeric)).view(b, c, length // p, -1)
        log_prob = self.matching(tokens, self.encoder)  # (B, S, N, V)
        per_step = log_prob.repeat_interleave(p, dim=2)  # (B, S, L, V)
        sizes = torch.tensor(self.encoder.vocab_sizes, device=codes.device)[None, :, None]
        known = codes < sizes
        picked = per_step.gather(-1, codes.clamp_max(per_step.shape[-1] - 1)[..., None])[..., 0]
        worst = per_step.masked_fill(per_step == float("-inf"), float("inf")).min(-1).values
        return -torch.where(known, picked, worst)


def inject_star(
    backbone: TSBackbone, config: STARConfig, *, n_numeric: int, vocab_sizes: tuple[int, ...] = ()
) -> STARModel:
    """Freeze ``backbone`` and inject STAR (peft-style: the chosen linears are replaced in place).

    Parameters
    ----------
    backbone : a ``TSBackbone`` ``nn.Module`` (e.g. ``load_tiny_tsfm()``); modified in place.
    config : ``STARConfig`` (target linears by their last name, rank, module switches).
    n_numeric : number of numeric channels (the matching head's channel identities).
    vocab_sizes : size of each state variable's vocabulary, in schema order; empty for no states.
    """
    return STARModel(backbone, config, n_numeric, tuple(vocab_sizes))
