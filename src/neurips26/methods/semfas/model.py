"""The SEM-FAS ``nn.Module``: per-modality encoders -> complex states -> density matrix -> POVM head.

Single-pass evidence measurement for multimodal face anti-spoofing: one forward pass returns calibrated
probabilities, their exact per-modality main effects and pairwise synergy/suppression terms, and three
sampling-free uncertainties (ambiguity, mixedness, coverage mismatch).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from neurips26.methods.semfas import core

DEFAULT_CLASSES = ("live", "spoof")
AMPLITUDE_FLOOR = 1e-3  # ours: a present modality keeps a little evidence, so no head vanishes


@dataclass
class SEMFASOutput:
    """What one forward pass of :class:`SEMFAS` returns.

    Attributes
    ----------
    probs : [B, C]              calibrated class probabilities (class 0 live, class 1 spoof by default)
    log_probs : [B, C]          their logarithms (what the loss uses)
    born : [B, C]               P(c) = Tr(rho E_c), before normalisation
    main_effects : [B, C, M]    per-modality main effects of P(c)
    pairwise : [B, C, M, M]     pairwise interference terms, upper triangle (m < n); positive = synergy,
                                negative = suppression;
                                ``born == main_effects.sum(-1) + pairwise.sum((-2, -1))``
    ambiguity : [B]             entropy of ``probs`` (nats)
    mixedness : [B]             1 - Tr(rho^2)
    coverage_mismatch : [B]     Tr(rho E_perp) = 1 - sum_c P(c)
    amplitudes : [B, M]         evidence strengths a_m (0 for a missing modality)
    head_states : [B, K, d]     the normalised coherent heads Psi_k
    head_weights : [K]          their mixing weights pi_k
    modalities : tuple[str]     the order of the M axis
    classes : tuple[str]        the order of the C axis
    """

    probs: Tensor
    log_probs: Tensor
    born: Tensor
    main_effects: Tensor
    pairwise: Tensor
    ambiguity: Tensor
    mixedness: Tensor
    coverage_mismatch: Tensor
    amplitudes: Tensor
    head_states: Tensor
    head_weights: Tensor
    modalities: tuple[str, ...]
    classes: tuple[str, ...]

    @property
    def rho(self) -> Tensor:
        """The density matrix rho = sum_k pi_k |Psi_k><Psi_k| ([B, d, d]); built on demand."""
        return core.density_matrix(self.head_states, self.head_weights)

    def von_neumann_entropy(self) -> Tensor:
        """-Tr(rho log rho) via ``torch.linalg.eigvalsh`` ([B]); an alternative mixedness score."""
        return core.von_neumann_entropy(self.rho)


def _feature_dim(name: str, encoder: nn.Module) -> int:
    last = None
    for module in encoder.modules():
        if isinstance(module, (nn.Linear, nn.Conv1d)):
            last = module
    if isinstance(last, nn.Linear):
        return last.out_features
    raise ValueError(f"cannot infer the output size of encoder {name!r}; pass feature_dims={{{name!r}: int}}")


class SEMFAS(nn.Module):
    """SEM-FAS: single-pass evidence measurement for multimodal face anti-spoofing.

    The Born rule ``P(c) = Tr(rho E_c)`` on a mixture of coherent superpositions of per-modality
    complex states gives probabilities that split exactly into per-modality main effects and pairwise
    interference terms; mixedness ``1 - Tr(rho^2)`` and coverage mismatch ``Tr(rho E_perp)`` come free.

    Parameters
    ----------
    encoders : dict[str, nn.Module]
        One encoder per modality (any names); each maps that modality's tensor [B, ...] to features
        [B, F_m].
    dim : int, default 32
        State dimension d (issue); >= 2.
    heads : int, default 4
        Coherent heads K (issue); 1 gives a pure state (the ablation).
    povm_rank : int, default 8
        Rank r of each A_c (ours).
    classes : tuple[str, ...], default ("live", "spoof")
    temperature : float, default 1.0
        p = P^(1/T) normalised; :func:`~neurips26.methods.semfas.core.fit_temperature` refits it.
    use_phase : bool, default True
        False gives the real-valued ablation (real states, real POVM, and a signed real weight cos(theta)
        in place of each relative phase, so that several heads still form a mixture).
    use_coverage : bool, default True
        False whitens the POVM so that sum_c E_c = I (no coverage element).
    feature_dims : int or dict[str, int], optional
        Encoder output sizes; inferred from each encoder's last ``nn.Linear`` when omitted.
    coverage_weight : float, default 0.1
        Weight of the coverage-mass regulariser in :meth:`loss` (ours).
    """

    def __init__(
        self,
        encoders: Mapping[str, nn.Module],
        dim: int = 32,
        heads: int = 4,
        povm_rank: int = 8,
        classes: tuple[str, ...] = DEFAULT_CLASSES,
        temperature: float = 1.0,
        use_phase: bool = True,
        use_coverage: bool = True,
        feature_dims: int | Mapping[str, int] | None = None,
        coverage_weight: float = 0.1,
    ) -> None:
        super().__init__()
        if not isinstance(encoders, Mapping) or not encoders:
            raise ValueError("encoders must be a non-empty dict of modality name -> nn.Module")
        for name, encoder in encoders.items():
            if not isinstance(name, str) or not isinstance(encoder, nn.Module):
                raise TypeError(f"encoders[{name!r}] must map a str to an nn.Module, got {type(encoder)}")
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2:
            raise ValueError(f"dim must be an integer >= 2, got {dim!r}")
        if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
            raise ValueError(f"heads must be an integer >= 1, got {heads!r}")
        if isinstance(povm_rank, bool) or not isinstance(povm_rank, int) or not 1 <= povm_rank <= dim:
            raise ValueError(f"povm_rank must be an integer in [1, dim={dim}], got {povm_rank!r}")
        if len(classes) < 2:
            raise ValueError(f"classes must name at least 2 classes, got {classes!r}")
        if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature > 0):
            raise ValueError(f"temperature must be finite and > 0, got {temperature!r}")
        if not (isinstance(coverage_weight, (int, float)) and coverage_weight >= 0):
            raise ValueError(f"coverage_weight must be >= 0, got {coverage_weight!r}")
        self.coverage_weight = float(coverage_weight)
        self.modalities = tuple(encoders)
        self.classes = tuple(classes)
        self.dim, self.heads = dim, heads
        self.use_phase, self.use_coverage = bool(use_phase), bool(use_coverage)
        self.encoders = nn.ModuleDict(dict(encoders))
        if feature_dims is None:
            sizes = {m: _feature_dim(m, e) for m, e in encoders.items()}
        elif isinstance(feature_dims, int):
            sizes = dict.fromkeys(self.modalities, feature_dims)
        else:
            sizes = {m: int(feature_dims[m]) for m in self.modalities}
        self.feature_dims = sizes
        n_modalities, n_classes = len(self.modalities), len(self.classes)
        # one matmul per modality: [w_m . h_m + b_m | A_m h_m | B_m h_m] (amplitude, real, imaginary part)
        self.projection = nn.ModuleDict({m: nn.Linear(sizes[m], 1 + 2 * dim) for m in self.modalities})
        self.beta = nn.Parameter(torch.ones(heads, n_modalities))
        self.theta = nn.Parameter(torch.rand(heads, n_modalities) * 2 * math.pi - math.pi)
        self.head_logits = nn.Parameter(torch.zeros(heads))
        scale = 1.0 / math.sqrt(dim)
        self.factor_real = nn.Parameter(torch.randn(n_classes, dim, povm_rank) * scale)
        self.factor_imag = nn.Parameter(torch.randn(n_classes, dim, povm_rank) * scale)
        self.register_buffer("temperature", torch.tensor(float(temperature)))

    # ----------------------------------------------------------------------------------------- inputs
    def _presence(self, inputs: Mapping[str, Tensor | None], mask: Tensor | Mapping | None) -> Tensor:
        unknown = sorted(set(inputs) - set(self.modalities))
        if unknown:
            raise ValueError(f"unknown modality names {unknown}; allowed: {list(self.modalities)}")
        sizes = {m: t.shape[0] for m, t in inputs.items() if t is not None}
        if not sizes:
            raise ValueError(f"all modalities are missing; give at least one of {list(self.modalities)}")
        if len(set(sizes.values())) != 1:
            raise ValueError(f"inputs must share the batch size, got {sizes}")
        batch = next(iter(sizes.values()))
        present = torch.zeros(batch, len(self.modalities), dtype=torch.bool)
        for index, name in enumerate(self.modalities):
            present[:, index] = inputs.get(name) is not None
        if mask is not None:
            if isinstance(mask, Mapping):
                extra = sorted(set(mask) - set(self.modalities))
                if extra:
                    raise ValueError(
                        f"unknown modality names in mask {extra}; allowed: {list(self.modalities)}"
                    )
                given = torch.ones_like(present)
                for index, name in enumerate(self.modalities):
                    if name in mask:
                        given[:, index] = torch.as_tensor(mask[name]).reshape(-1).bool()
            else:
                given = torch.as_tensor(mask).bool()
            if given.shape != present.shape:
                raise ValueError(
                    f"mask must have shape {tuple(present.shape)} [batch, modalities], "
                    f"got {tuple(given.shape)}"
                )
            present = present & given.cpu()
        empty = (~present.any(1)).nonzero().flatten()
        if len(empty):
            raise ValueError(f"all modalities are missing for samples {empty[:10].tolist()}")
        return present

    def encode(
        self, inputs: Mapping[str, Tensor | None], mask: Tensor | Mapping | None = None
    ) -> tuple[list[Tensor | None], Tensor]:
        """Run each present modality's encoder; returns the features and the presence mask [B, M]."""
        if not isinstance(inputs, Mapping):
            raise TypeError(
                f"inputs must be a dict of modality name -> tensor or None, got {type(inputs).__name__}"
            )
        present = self._presence(inputs, mask)
        features: list[Tensor | None] = []
        for name in self.modalities:
            value = inputs.get(name)
            if value is None:
                features.append(None)
                continue
            if not torch.is_tensor(value):
                raise TypeError(f"inputs[{name!r}] must be a tensor or None, got {type(value).__name__}")
            if not bool(torch.isfinite(value).all()):
                raise ValueError(f"inputs[{name!r}] contains NaN or infinite values")
            h = self.encoders[name](value)
            if h.ndim != 2 or h.shape[1] != self.feature_dims[name]:
                raise ValueError(
                    f"encoder {name!r} returned shape {tuple(h.shape)}; "
                    f"expected [batch, {self.feature_dims[name]}]"
                )
            features.append(h)
        return features, present

    # ----------------------------------------------------------------------------------------- states
    def states(self, features: list[Tensor | None], present: Tensor) -> tuple[Tensor, Tensor]:
        """Amplitudes a [B, M] and unit states psi [B, M, d] (complex unless ``use_phase=False``)."""
        batch = present.shape[0]
        device = self.beta.device
        projected = []
        for name, h in zip(self.modalities, features, strict=True):
            if h is None:
                projected.append(torch.zeros(batch, 1 + 2 * self.dim, device=device))
            else:
                projected.append(self.projection[name](h))
        stacked = torch.stack(projected, 1)  # [B, M, 1 + 2d]
        mask = present.to(device)
        amplitude = (F.softplus(stacked[..., 0]) + AMPLITUDE_FLOOR) * mask  # a_m, 0 when missing
        raw = stacked[..., 1 : 1 + self.dim]  # A_m h_m
        if self.use_phase:
            raw = torch.complex(raw, stacked[..., 1 + self.dim :])  # + i B_m h_m
        return amplitude, core.normalise_states(raw, mask)

    def measurement_factors(self) -> Tensor:
        """F_c with E_c = F_c F_c^H and sum_c E_c <= I ([C, d, r])."""
        raw = torch.complex(self.factor_real, self.factor_imag) if self.use_phase else self.factor_real
        return core.povm_factors(raw)

    def povm(self) -> tuple[Tensor, Tensor]:
        """The measurement elements E_c [C, d, d] and the coverage element E_perp [d, d]."""
        factors = self.measurement_factors()
        elements = torch.einsum("cdr,cer->cde", factors, factors.conj())
        identity = torch.eye(self.dim, dtype=elements.dtype, device=elements.device)
        coverage = identity - elements.sum(0)
        if not self.use_coverage:  # the ablation: the remainder is shared among the classes
            elements = elements + coverage / elements.shape[0]
            coverage = torch.zeros_like(coverage)
        return elements, coverage

    # ----------------------------------------------------------------------------------------- forward
    def forward(
        self, inputs: Mapping[str, Tensor | None], mask: Tensor | Mapping | None = None
    ) -> SEMFASOutput:
        """Measure a batch.

        Parameters
        ----------
        inputs : dict[str, Tensor or None]
            Modality name -> tensor [B, ...] for the modality's encoder; ``None`` (or an absent key)
            marks a modality missing for the whole batch.
        mask : Tensor [B, M] bool or dict[str, Tensor [B] bool], optional
            Per-sample presence (False = missing); combined with the ``None`` entries.
        """
        features, present = self.encode(inputs, mask)
        amplitude, psi = self.states(features, present)
        # real states keep a signed relative weight cos(theta), so the heads still differ (issue #43)
        coefficients = core.head_coefficients(
            amplitude, self.beta, self.theta, complex_phase=self.use_phase
        )  # c_km
        pi = torch.softmax(self.head_logits, 0)
        measured = core.born_decomposition(
            psi, coefficients, pi, self.measurement_factors(), complete=not self.use_coverage
        )
        log_probs = core.calibrated_log_probs(measured.born, self.temperature)
        purity = core.purity(measured.head_states, pi)
        return SEMFASOutput(
            probs=log_probs.exp(),
            log_probs=log_probs,
            born=measured.born,
            main_effects=measured.main_effects,
            pairwise=measured.pairwise,
            ambiguity=core.ambiguity(log_probs),
            mixedness=(1.0 - purity).clamp_min(0.0),
            coverage_mismatch=(1.0 - measured.born.sum(-1)).clamp_min(0.0),
            amplitudes=amplitude,
            head_states=measured.head_states,
            head_weights=pi,
            modalities=self.modalities,
            classes=self.classes,
        )

    def loss(self, output: SEMFASOutput, labels: Tensor, epoch_fraction: float = 1.0) -> Tensor:
        """Cross-entropy + ``coverage_weight`` x mean Tr(rho E_perp) (see :func:`training.semfas_loss`)."""
        from neurips26.methods.semfas.training import semfas_loss

        return semfas_loss(output, labels, self.coverage_weight if self.use_coverage else 0.0)


def explain(output: SEMFASOutput, samples: int | list[int] | None = None) -> list[dict]:
    """A per-sample table: prediction, each modality's main effect and the strongest pairwise term.

    Effects are those of the predicted class's P(c); ``share_*`` divides them by P(c) (they add up to 1
    with the pairwise shares). Positive pairwise terms are synergy, negative ones suppression.

    Parameters
    ----------
    output : SEMFASOutput
    samples : int, list of int or None
        Which rows (all when None).
    """
    if not isinstance(output, SEMFASOutput):
        raise TypeError(f"output must be a SEMFASOutput, got {type(output).__name__}")
    output = SEMFASOutput(**{k: (v.detach() if torch.is_tensor(v) else v) for k, v in vars(output).items()})
    batch = output.probs.shape[0]
    rows_wanted = range(batch) if samples is None else ([samples] if isinstance(samples, int) else samples)
    names = output.modalities
    rows = []
    for b in rows_wanted:
        if not 0 <= b < batch:
            raise ValueError(f"samples must lie in [0, {batch}), got {b}")
        c = int(output.probs[b].argmax())
        born = float(output.born[b, c])
        main = output.main_effects[b, c].detach()
        pair = output.pairwise[b, c].detach()
        row: dict = {
            "sample": b,
            "prediction": output.classes[c],
            "probability": float(output.probs[b, c]),
            "born": born,
        }
        for i, name in enumerate(names):
            row[f"main_{name}"] = float(main[i])
            row[f"share_{name}"] = float(main[i]) / born if born > 0 else float("nan")
        if len(names) > 1:
            upper = torch.triu_indices(len(names), len(names), 1)
            values = pair[upper[0], upper[1]]
            j = int(values.abs().argmax())
            m, n = int(upper[0, j]), int(upper[1, j])
            row["top_pair"] = f"{names[m]}+{names[n]}"
            row["top_pair_value"] = float(values[j])
            row["top_pair_kind"] = "synergy" if float(values[j]) >= 0 else "suppression"
        row["top_modality"] = names[int(main.argmax())]
        row["ambiguity"] = float(output.ambiguity[b])
        row["mixedness"] = float(output.mixedness[b])
        row["coverage_mismatch"] = float(output.coverage_mismatch[b])
        rows.append(row)
    return rows
