"""SEM-FAS: the module's invariants, the exact decomposition, its oracles and bad input."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings
from torch import nn

from neurips26.methods.semfas import SEMFAS, core, explain
from neurips26.methods.semfas.training import modality_dropout, semfas_loss

torch.set_num_threads(1)
NAMES = ("rgb", "depth", "ir")


def _model(seed: int = 0, dim: int = 8, heads: int = 3, names=NAMES, **kwargs) -> SEMFAS:
    torch.manual_seed(seed)
    encoders = {m: nn.Sequential(nn.Linear(5, 6), nn.Tanh(), nn.Linear(6, 6)) for m in names}
    return SEMFAS(encoders, dim=dim, heads=heads, povm_rank=2, **kwargs).double()


def _inputs(batch: int = 4, seed: int = 1, names=NAMES) -> dict:
    generator = torch.Generator().manual_seed(seed)
    return {m: torch.randn(batch, 5, generator=generator, dtype=torch.float64) for m in names}


def _naive_born(model: SEMFAS, out) -> torch.Tensor:
    """Oracle: form rho and E_c explicitly and take Tr(rho E_c)."""
    elements, _ = model.povm()
    return torch.einsum("bde,ced->bc", out.rho, elements).real


def test_decomposition_sums_exactly_to_born_and_matches_the_trace() -> None:
    model = _model()
    out = model(_inputs())
    total = out.main_effects.sum(-1) + out.pairwise.sum((-2, -1))
    assert torch.allclose(total, out.born, atol=1e-10)
    assert torch.allclose(_naive_born(model, out), out.born, atol=1e-10)
    # the calibrated probabilities are P normalised (T = 1)
    assert torch.allclose(out.probs, out.born / out.born.sum(-1, keepdim=True), atol=1e-10)


def test_einsum_decomposition_equals_a_naive_double_loop() -> None:
    model = _model(seed=3)
    inputs = _inputs(seed=4)
    features, present = model.encode(inputs)
    amplitude, psi = model.states(features, present)
    c = core.head_coefficients(amplitude, model.beta, model.theta)
    pi = torch.softmax(model.head_logits, 0)
    elements, _ = model.povm()
    out = model(inputs)
    batch, n_classes, n_mod = out.main_effects.shape
    for b in range(batch):
        for k_class in range(n_classes):
            main = torch.zeros(n_mod, dtype=torch.float64)
            pair = torch.zeros(n_mod, n_mod, dtype=torch.float64)
            for k in range(model.heads):
                phi = sum(c[b, k, m] * psi[b, m] for m in range(n_mod))
                norm2 = (phi.conj() @ phi).real
                for m in range(n_mod):
                    for n in range(n_mod):
                        term = (
                            c[b, k, m].conj()
                            * c[b, k, n]
                            * (psi[b, m].conj() @ elements[k_class] @ psi[b, n])
                        )
                        if m == n:
                            main[m] += pi[k] * term.real / norm2
                        elif m < n:
                            pair[m, n] += pi[k] * 2 * term.real / norm2
            assert torch.allclose(main, out.main_effects[b, k_class], atol=1e-10)
            assert torch.allclose(pair, out.pairwise[b, k_class], atol=1e-10)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    dim=st.integers(2, 9),
    heads=st.integers(1, 4),
    complete=st.booleans(),
    phase=st.booleans(),
)
def test_rho_is_psd_with_trace_one_and_the_povm_sums_below_identity(
    seed, dim, heads, complete, phase
) -> None:
    torch.manual_seed(seed)
    encoders = {m: nn.Linear(5, 4) for m in NAMES}
    model = SEMFAS(
        encoders, dim=dim, heads=heads, povm_rank=1, use_coverage=not complete, use_phase=phase
    ).double()
    out = model(_inputs(3, seed))
    rho = out.rho
    assert torch.allclose(
        torch.diagonal(rho, dim1=-2, dim2=-1).sum(-1).real, torch.ones(3, dtype=torch.float64)
    )
    assert torch.allclose(rho, rho.mH, atol=1e-12)
    assert torch.linalg.eigvalsh(rho).min() > -1e-10
    elements, coverage = model.povm()
    assert torch.linalg.eigvalsh(coverage).min() > -1e-8  # sum_c E_c <= I
    for element in elements:
        assert torch.linalg.eigvalsh(element).min() > -1e-10
    assert (out.coverage_mismatch >= 0).all() and (out.mixedness >= 0).all()
    assert torch.allclose(out.probs.sum(-1), torch.ones(3, dtype=torch.float64))
    # coverage mismatch is Tr(rho E_perp)
    assert torch.allclose(torch.einsum("bde,ed->b", rho, coverage).real, out.coverage_mismatch, atol=1e-8)
    if complete:
        assert out.coverage_mismatch.abs().max() < 1e-6


def test_missing_modality_has_zero_main_and_pairwise_terms() -> None:
    model = _model()
    inputs = _inputs()
    mask = torch.tensor([[1, 1, 1], [1, 0, 1], [0, 1, 1], [1, 1, 0]], dtype=torch.bool)
    out = model(inputs, mask)
    for b, row in enumerate(mask):
        for m, present in enumerate(row):
            if not present:
                assert out.main_effects[b, :, m].abs().max() == 0
                assert out.pairwise[b, :, m, :].abs().max() == 0 and out.pairwise[b, :, :, m].abs().max() == 0
                assert out.amplitudes[b, m] == 0
    # None for a whole modality equals masking it
    masked = model(inputs, {"depth": torch.zeros(4, dtype=torch.bool)})
    dropped = model({**inputs, "depth": None})
    assert torch.allclose(masked.probs, dropped.probs)
    total = out.main_effects.sum(-1) + out.pairwise.sum((-2, -1))
    assert torch.allclose(total, out.born, atol=1e-10)


def test_with_one_modality_p_equals_its_main_effect() -> None:
    model = _model()
    out = model({"rgb": _inputs()["rgb"]})
    assert torch.allclose(out.main_effects[..., 0], out.born, atol=1e-12)
    assert out.pairwise.abs().max() == 0


def test_real_states_with_zero_phases_equal_the_real_valued_ablation_exactly() -> None:
    complex_model = _model(seed=5)
    with torch.no_grad():
        for layer in complex_model.projection.values():  # rows 1 + d: are B_m (the imaginary part)
            layer.weight[1 + complex_model.dim :].zero_()
            layer.bias[1 + complex_model.dim :].zero_()
        complex_model.theta.zero_()
        complex_model.factor_imag.zero_()
    real_model = _model(seed=6, use_phase=False)
    real_model.load_state_dict(complex_model.state_dict())
    inputs = _inputs(seed=7)
    a, b = complex_model(inputs), real_model(inputs)
    assert not b.main_effects.is_complex() and not b.head_states.is_complex()
    for field in ("probs", "born", "main_effects", "pairwise", "mixedness", "coverage_mismatch"):
        assert torch.allclose(getattr(a, field), getattr(b, field), atol=1e-12), field


def test_phases_change_the_prediction_through_interference() -> None:
    """Idea-off: with phases switched off the pairwise terms and P(c) change (phases do work)."""
    model = _model(seed=8)
    inputs = _inputs(seed=9)
    with_phase = model(inputs)
    with torch.no_grad():
        model.theta.zero_()
    without = model(inputs)
    assert (with_phase.pairwise - without.pairwise).abs().max() > 1e-3
    assert (with_phase.born - without.born).abs().max() > 1e-4


@pytest.mark.parametrize("amplitude_wired", [True, False], ids=["wired", "amplitude_fixed_to_one"])
def test_idea_evidence_strength_weights_a_modality_in_the_measurement(monkeypatch, amplitude_wired) -> None:
    """Central idea (amplitude = evidence strength), through ``SEMFAS.forward``: raising one modality's
    amplitude pre-activation (w_m . h_m + b_m) hands it the measurement: its share of the main effects
    goes from ~0 to most of them. The negative case is issue 43's break: every present modality's
    amplitude fixed to 1 inside ``SEMFAS.states``; the share then cannot move."""
    if not amplitude_wired:
        states = SEMFAS.states

        def unit_amplitudes(self, features, present):
            amplitude, psi = states(self, features, present)
            return (amplitude > 0).to(amplitude.dtype), psi

        monkeypatch.setattr(SEMFAS, "states", unit_amplitudes)
    model, inputs = _model(seed=3), _inputs(seed=4)
    shares = []
    for amplitude_bias in (-4.0, 4.0):
        with torch.no_grad():
            model.projection["rgb"].bias[0] = amplitude_bias  # row 0 of the projection is the amplitude
            main = model(inputs).main_effects  # [B, C, M]
        shares.append(main[..., 0].sum(-1) / main.sum((-1, -2)))  # rgb's share per sample
    weak, strong = shares
    assert bool((weak < 0.05).all() and (strong > 0.6).all()) == amplitude_wired, (weak, strong)


def test_single_head_is_a_pure_state_and_several_heads_mix() -> None:
    assert _model(heads=1)(_inputs()).mixedness.abs().max() < 1e-12
    assert _model(heads=3)(_inputs()).mixedness.min() > 1e-4
    # issue #43: the real (phase-free) ablation must remove the phases only, not the mixture too
    assert _model(heads=3, use_phase=False)(_inputs()).mixedness.min() > 1e-4
    out = _model(heads=3)(_inputs())
    assert torch.allclose(out.von_neumann_entropy() > 0, torch.ones(4, dtype=torch.bool))


def test_coverage_element_off_means_zero_coverage_mismatch() -> None:
    assert _model(use_coverage=True)(_inputs()).coverage_mismatch.min() > 1e-3
    assert _model(use_coverage=False)(_inputs()).coverage_mismatch.abs().max() < 1e-6


def test_loss_gradients_reach_every_part_and_the_coverage_term_counts() -> None:
    model = _model()
    out = model(_inputs())
    labels = torch.tensor([0, 1, 1, 0])
    loss = semfas_loss(out, labels, 0.5)
    assert torch.isclose(loss, semfas_loss(out, labels, 0.0) + 0.5 * out.coverage_mismatch.mean())
    loss.backward()
    for name in ("beta", "theta", "head_logits", "factor_real", "factor_imag"):
        assert getattr(model, name).grad.abs().sum() > 0, name


def test_modality_dropout_keeps_one_modality_and_drops_others() -> None:
    present = torch.ones(500, 3, dtype=torch.bool)
    dropped = modality_dropout(present, 0.6, torch.Generator().manual_seed(0))
    assert dropped.any(1).all()
    assert 0.3 < 1 - dropped.float().mean() < 0.6
    partial = present.clone()
    partial[:, 0] = False
    assert not modality_dropout(partial, 0.9, torch.Generator().manual_seed(1))[:, 0].any()


def test_explain_gives_a_row_per_sample() -> None:
    model = _model()
    out = model(_inputs())
    rows = explain(out)
    assert len(rows) == 4
    row = rows[0]
    shares = sum(row[f"share_{m}"] for m in NAMES)
    pair_share = float(out.pairwise[0, int(out.probs[0].argmax())].sum().detach()) / row["born"]
    assert abs(shares + pair_share - 1) < 1e-9
    assert row["top_pair_kind"] in ("synergy", "suppression") and row["top_modality"] in NAMES
    assert explain(out, 2)[0]["sample"] == 2


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: _model(dim=1), "dim"),
        (lambda: _model(heads=0), "heads"),
        (lambda: SEMFAS({}, dim=4), "encoders"),
        (lambda: _model(dim=4, povm_rank=9), "povm_rank"),
        (lambda: _model(temperature=0.0), "temperature"),
    ],
)
def test_bad_construction_is_refused(build, match) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        build()


def test_bad_input_is_refused_with_the_argument_named() -> None:
    model = _model()
    inputs = _inputs()
    with pytest.raises(ValueError, match="all modalities are missing"):
        model({m: None for m in NAMES})
    with pytest.raises(ValueError, match=r"unknown modality names \['thermal'\].*allowed"):
        model({**inputs, "thermal": inputs["rgb"]})
    with pytest.raises(ValueError, match="batch size"):
        model({**inputs, "ir": inputs["ir"][:2]})
    with pytest.raises(ValueError, match="NaN"):
        model({**inputs, "rgb": inputs["rgb"] * float("nan")})
    with pytest.raises(ValueError, match="samples"):
        model(inputs, torch.zeros(4, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask must have shape"):
        model(inputs, torch.ones(4, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"\{0, 1\}"):
        semfas_loss(model(inputs), torch.tensor([0, 1, 2, 0]))
    wrong = SEMFAS({m: nn.Linear(5, 4) for m in NAMES}, dim=4, povm_rank=2, feature_dims=3)
    with pytest.raises(ValueError, match="encoder 'rgb' returned shape"):
        wrong(_inputs() | {m: v.float() for m, v in _inputs().items()})
