"""STAR: init equality, degenerate equivalence to a static (peft) LoRA, frozen backbone, invariances,
idea-off tests for each module, the pyod contract, state_dict round trip and bad input."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from neurips26.methods.star import STARConfig, STARDetector, inject_star
from neurips26.methods.star.baselines import BackboneDetector, FrozenReconstructor
from neurips26.methods.star.core import ConditionalBottleneckLinear
from neurips26.methods.star.tsfm import TinyTSFM, TinyTSFMConfig

torch.set_num_threads(1)
SMALL = TinyTSFMConfig(d_model=16, n_heads=2, n_layers=1, d_ff=32, max_patches=16)


def small_backbone(seed: int = 0) -> TinyTSFM:
    torch.manual_seed(seed)
    model = TinyTSFM(SMALL).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def toy_series(n: int = 800, seed: int = 0) -> tuple[np.ndarray, dict]:
    """Two numeric channels driven by a valve state (0/1) and a 3-valued mode; states in columns 2, 3."""
    rng = np.random.default_rng(seed)
    valve = (np.cumsum(rng.random(n) < 0.03) % 2).astype(float)
    mode = (np.cumsum(rng.random(n) < 0.01) % 3).astype(float)
    flow = valve * (1.0 + 0.5 * mode) + 0.05 * rng.normal(size=n)
    level = np.sin(np.arange(n) / 9.0) + 0.3 * mode + 0.05 * rng.normal(size=n)
    return np.stack([flow, level, valve, mode], axis=1), {2: (0, 1), 3: (0, 1, 2)}


def random_codes(b: int, sizes: tuple[int, ...], length: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randint(0, v, (b, length), generator=g) for v in sizes], dim=1)


def fast(**kwargs) -> dict:
    return {"window": 32, "n_steps": 4, "batch_size": 4, "stride": 8, **kwargs}


# ---------------------------------------------------------------- equivalences


def test_init_scores_equal_frozen_backbone_exactly() -> None:
    X, schema = toy_series()
    bb = small_backbone()
    star = STARDetector(schema, bb, **fast(n_steps=0)).fit(X)
    base = BackboneDetector(schema, bb, state_handling="drop", adapter="none", **fast(n_steps=0)).fit(X)
    np.testing.assert_array_equal(star.decision_function(X), base.decision_function(X))
    np.testing.assert_array_equal(star.decision_scores_, base.decision_scores_)


def test_no_states_equals_backbone_plus_static_peft_lora() -> None:
    """With no state columns the gate is the static b_h and there is no matching term: a LoRA layer."""
    bb = small_backbone()
    config = STARConfig(target_modules=("q", "v", "fc2"), rank=3, alpha=6.0)
    model = inject_star(copy.deepcopy(bb), config, n_numeric=2, vocab_sizes=())
    torch.manual_seed(1)
    for adapter in model.adapters.values():
        adapter.lora_B.data.normal_()
        adapter.gate_bias.data.uniform_(0.5, 1.5)
    from peft import LoraConfig

    lora = FrozenReconstructor(
        copy.deepcopy(bb), LoraConfig(r=3, lora_alpha=6.0, target_modules=["q", "v", "fc2"])
    )
    for name, adapter in model.adapters.items():
        layer = lora.backbone.get_submodule(name.replace("_", "."))
        layer.lora_A["default"].weight.data.copy_(adapter.lora_A)
        layer.lora_B["default"].weight.data.copy_(adapter.lora_B * adapter.gate_bias)  # B diag(b_h)
    x = torch.randn(3, 2, 32)
    codes = torch.zeros(3, 0, 32, dtype=torch.long)
    err_star, nll = model(x, codes)
    err_lora, _ = lora(x, codes)
    assert nll is None
    torch.testing.assert_close(err_star, err_lora, rtol=1e-5, atol=1e-6)


def test_backbone_weights_never_change_in_fine_tuning() -> None:
    X, schema = toy_series()
    bb = small_backbone()
    before = {k: v.clone() for k, v in bb.state_dict().items()}
    det = STARDetector(schema, bb, **fast(n_steps=10)).fit(X)
    for k, v in bb.state_dict().items():  # the user's backbone: copied, untouched
        torch.testing.assert_close(v, before[k], rtol=0, atol=0)
    inner = {k.replace(".base.", "."): v for k, v in det.model_.backbone.state_dict().items()}
    for k, v in before.items():  # the detector's frozen copy: unchanged by training
        torch.testing.assert_close(inner[k], v, rtol=0, atol=0)
    adapter_names = ("lora_A", "lora_B", "gate")
    for name, p in det.model_.backbone.named_parameters():
        assert p.requires_grad == any(a in name for a in adapter_names), name
    assert any(a.lora_B.abs().sum() > 0 for a in det.model_.adapters.values())  # the adapter did train


# ---------------------------------------------------------------- invariances (hypothesis)


@settings(max_examples=15, deadline=None)
@given(
    perm_numeric=st.permutations(range(3)),
    perm_states=st.permutations(range(3)),
    seed=st.integers(0, 1000),
)
def test_scores_equivariant_to_permuting_channels_with_schema(perm_numeric, perm_states, seed) -> None:
    """Permuting numeric channels and state variables (with their parameters) leaves scores unchanged."""
    sizes = (2, 3, 4)
    torch.manual_seed(seed)
    model = inject_star(small_backbone(), STARConfig(), n_numeric=3, vocab_sizes=sizes)
    for adapter in model.adapters.values():
        adapter.lora_B.data.normal_()
    torch.nn.init.normal_(model.matching.out.weight)
    x = torch.randn(2, 3, 32)
    codes = random_codes(2, sizes, 32, seed)
    err, nll = model(x, codes)

    pn, ps = list(perm_numeric), list(perm_states)
    permuted = inject_star(
        small_backbone(), STARConfig(), n_numeric=3, vocab_sizes=tuple(sizes[j] for j in ps)
    )
    state = model.state_dict()
    enc = model.encoder
    blocks = [enc.values[enc.offsets[j] : enc.offsets[j] + sizes[j] + 1] for j in range(3)]
    state["encoder.values"] = torch.cat([blocks[j] for j in ps])
    state["encoder.identity"] = enc.identity[ps]
    state["matching.channel"] = model.matching.channel[pn]
    state["channel_identity"] = model.channel_identity[pn]
    permuted.load_state_dict(state)
    err_p, nll_p = permuted(x[:, pn], codes[:, ps])
    torch.testing.assert_close(err_p, err[:, pn], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(nll_p, nll[:, ps], rtol=1e-4, atol=1e-5)


@settings(max_examples=5, deadline=None)
@given(columns=st.permutations(["flow", "level", "valve", "mode"]))
def test_frame_column_order_does_not_matter(columns) -> None:
    pd = pytest.importorskip("pandas")
    X, _ = toy_series()
    frame = pd.DataFrame(X, columns=["flow", "level", "valve", "mode"])
    schema = {"valve": (0, 1), "mode": (0, 1, 2)}
    det = STARDetector(schema, small_backbone(), **fast(n_steps=3)).fit(frame)
    reordered = STARDetector(schema, small_backbone(), **fast(n_steps=3)).fit(frame[list(columns)])
    np.testing.assert_array_equal(det.decision_function(frame[list(columns)]), det.decision_function(frame))
    np.testing.assert_allclose(
        reordered.decision_function(frame), det.decision_function(frame), rtol=1e-5, atol=1e-6
    )


def test_scores_invariant_to_relabelling_a_vocabulary_but_states_as_numbers_are_not() -> None:
    """States are categories (identity + value embeddings): renaming codes changes nothing. The idea off
    (codes fed as numbers) is not invariant."""
    X, schema = toy_series()
    relabel = {0: 7, 1: -3, 2: 11}
    Y = X.copy()
    Y[:, 3] = np.vectorize(relabel.get)(X[:, 3])
    schema_y = {2: (0, 1), 3: (7, -3, 11)}
    a = STARDetector(schema, small_backbone(), **fast(n_steps=6)).fit(X).decision_function(X)
    b = STARDetector(schema_y, small_backbone(), **fast(n_steps=6)).fit(Y).decision_function(Y)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    c = BackboneDetector(schema, small_backbone(), "numbers", **fast(n_steps=6)).fit(X).decision_function(X)
    d = BackboneDetector(schema_y, small_backbone(), "numbers", **fast(n_steps=6)).fit(Y).decision_function(Y)
    assert np.abs(c - d).max() > 1e-3


# ---------------------------------------------------------------- idea-off tests


def test_idea_conditional_adapter_uses_the_state_and_off_it_does_not() -> None:
    sizes = (2, 3)
    x = torch.randn(2, 2, 32)
    a, b = random_codes(2, sizes, 32, 0), random_codes(2, sizes, 32, 1)
    for conditioning in (True, False):
        model = inject_star(
            small_backbone(), STARConfig(use_conditioning=conditioning), n_numeric=2, vocab_sizes=sizes
        )
        for adapter in model.adapters.values():
            adapter.lora_B.data.normal_()
        diff = (model(x, a)[0] - model(x, b)[0]).abs().max()
        assert (diff > 1e-4) if conditioning else (diff == 0)
        assert all(isinstance(m, ConditionalBottleneckLinear) for m in model.adapters.values())


def test_idea_memory_read_changes_state_tokens_and_off_it_is_the_plain_sum() -> None:
    sizes = (2, 3)
    codes = random_codes(2, sizes, 32)
    on = inject_star(small_backbone(), STARConfig(use_memory=True), n_numeric=2, vocab_sizes=sizes)
    off = inject_star(small_backbone(), STARConfig(use_memory=False), n_numeric=2, vocab_sizes=sizes)
    off.encoder.load_state_dict(on.encoder.state_dict())
    tokens_on, _ = on.encoder(codes, 8)
    tokens_off, _ = off.encoder(codes, 8)
    plain = off.encoder.identity[None, :, None] + off.encoder.value_embeddings(codes).reshape(
        2, 2, 4, 8, -1
    ).mean(3)
    torch.testing.assert_close(tokens_off, plain)
    assert (tokens_on - tokens_off).abs().max() > 1e-3


def test_idea_matching_flags_a_state_flip_with_no_numeric_effect() -> None:
    """Trained on the toy plant, a valve reported flipped (numerics intact) scores higher with matching."""
    X, schema = toy_series(1200)
    flipped = X.copy()
    segment = slice(600, 640)
    flipped[segment, 2] = 1 - flipped[segment, 2]
    gains = {}
    for matching in (True, False):
        det = STARDetector(
            schema, small_backbone(), STARConfig(use_matching=matching), **fast(n_steps=120, lr=1e-2)
        ).fit(X)
        s = det.decision_function(flipped)
        gains[matching] = s[segment].mean() - np.delete(s, np.r_[segment]).mean()
    assert gains[True] > gains[False] + 0.5


def _state_swap_effect(config: STARConfig) -> np.ndarray:
    """A detector trained on the toy plant: how much its scores move when the mode column (a state) is
    rewritten on a segment, the numerics intact (|score change| on the segment)."""
    X, schema = toy_series(600)
    swapped = X.copy()
    swapped[300:400, 3] = (swapped[300:400, 3] + 1) % 3
    det = STARDetector(schema, small_backbone(), config, **fast(n_steps=40, lr=1e-2)).fit(X)
    return np.abs(det.decision_function(swapped) - det.decision_function(X))[300:400]


def test_idea_detector_conditions_the_adapter_on_the_state() -> None:
    """Central idea (Conditional Bottleneck Adapter), through ``STARDetector.fit/decision_function``: with
    matching and memory off, the only path from the states to the score is the state-conditioned gate,
    so rewriting a state moves the scores. Off (the gate ignores the context inside the adapter, or
    ``use_conditioning=False``) the scores are bit-identical and this fails."""
    effect = _state_swap_effect(STARConfig(use_matching=False, use_memory=False))
    assert effect.mean() > 1e-3, effect.mean()
    # the control: the same detector without conditioning cannot see the states at all
    blind = STARConfig(use_matching=False, use_memory=False, use_conditioning=False)
    assert _state_swap_effect(blind).max() == 0


def test_idea_detector_reads_the_state_memory() -> None:
    """Central idea (Identity-guided State Encoder's memory), through ``STARDetector``: the memory read
    changes the trained detector's state-dependent scores (memory on vs off, same seed and init). Off
    (the encoder skips the read) the two are bit-identical and this fails. Wired is not useful: the
    ``star_no_memory`` ablation scores the same or better in ``full`` (issue 43: inert)."""
    on = _state_swap_effect(STARConfig(use_matching=False, use_memory=True))
    off = _state_swap_effect(STARConfig(use_matching=False, use_memory=False))
    assert np.abs(on - off).max() > 1e-3


def test_explain_attributes_a_state_flip_to_the_state() -> None:
    X, schema = toy_series(1200)
    det = STARDetector(schema, small_backbone(), **fast(n_steps=120, lr=1e-2)).fit(X)
    flipped = X.copy()
    flipped[600:640, 2] = 1 - flipped[600:640, 2]
    parts = det.explain(flipped)
    np.testing.assert_allclose(parts["score"], det.decision_function(flipped), rtol=1e-6, atol=1e-6)
    assert parts["state_inherent"][600:640].mean() > parts["state_inherent"][:500].mean() + 0.5
    assert parts["state"][600:640, 0].mean() > parts["state"][600:640, 1].mean()  # the valve, not the mode


# ---------------------------------------------------------------- pyod contract, state_dict


def test_pyod_contract_params_clone_shapes_threshold() -> None:
    X, schema = toy_series()
    det = STARDetector(schema, small_backbone(), STARConfig(rank=2), **fast(), contamination=0.05)
    params = det.get_params()
    assert params["config"].rank == 2 and params["window"] == 32 and params["contamination"] == 0.05
    det.set_params(n_steps=2)
    twin = clone(det)
    assert twin.get_params()["n_steps"] == 2 and not hasattr(twin, "model_")
    det.fit(X)
    assert det.decision_scores_.shape == (len(X),)
    assert det.labels_.shape == (len(X),)
    assert abs(det.labels_.mean() - 0.05) < 0.02
    pred = det.predict(X[:100])
    assert pred.shape == (100,) and set(np.unique(pred)) <= {0, 1}
    proba = det.predict_proba(X[:100])
    assert proba.shape == (100, 2)


def test_sklearn_conventions_n_features_in_and_sparse_input() -> None:
    import scipy.sparse

    X, schema = toy_series(200)
    det = STARDetector(schema, small_backbone(), **fast(n_steps=1)).fit(X)
    assert det.n_features_in_ == 4
    with pytest.raises(ValueError, match="X has 3 features, but STARDetector is expecting 4"):
        det.decision_function(X[:, :3])
    with pytest.raises(TypeError, match="sparse input is not supported"):
        det.decision_function(scipy.sparse.csr_matrix(X))
    with pytest.raises(ValueError, match="Complex data not supported"):  # not silently cast to real
        det.decision_function(X + 1j)


def test_state_dict_round_trip() -> None:
    sizes = (2, 3)
    model = inject_star(small_backbone(), STARConfig(), n_numeric=2, vocab_sizes=sizes)
    for p in model.trainable_parameters():
        p.data.normal_()
    twin = inject_star(small_backbone(seed=5), STARConfig(), n_numeric=2, vocab_sizes=sizes)
    twin.load_state_dict(model.state_dict())
    x, codes = torch.randn(2, 2, 32), random_codes(2, sizes, 32)
    for a, b in zip(model(x, codes), twin(x, codes), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_trainable_parameters_below_ten_percent_of_tiny_tsfm() -> None:
    from neurips26.methods.star.plant_sim import STATE_VOCABULARIES

    bb = TinyTSFM()
    n_backbone = sum(p.numel() for p in bb.parameters())
    model = inject_star(
        bb, STARConfig(), n_numeric=8, vocab_sizes=tuple(len(v) for v in STATE_VOCABULARIES.values())
    )
    assert sum(p.numel() for p in model.trainable_parameters()) <= 0.10 * n_backbone


# ---------------------------------------------------------------- bad input


def test_unseen_state_value_is_flagged_not_a_crash() -> None:
    X, schema = toy_series()
    det = STARDetector(schema, small_backbone(), **fast()).fit(X)
    Y = X.copy()
    Y[100:110, 3] = 9  # mode 9 was never declared
    scores = det.decision_function(Y)
    assert np.isfinite(scores).all()
    assert det.last_unknown_[100:110, 1].all() and det.last_unknown_.sum() == 10
    assert det.explain(Y)["unknown"][100:110, 1].all()


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda X: X.__setitem__((5, 0), np.nan), r"X has NaN or inf in numeric channels \[0\]"),
        (lambda X: X.__setitem__((5, 2), 0.5), r"X column 2 \(a state\) has non-integer codes"),
    ],
)
def test_bad_values_name_the_argument(mutate, match) -> None:
    X, schema = toy_series()
    det = STARDetector(schema, small_backbone(), **fast()).fit(X)
    Y = X.copy()
    mutate(Y)
    with pytest.raises(ValueError, match=match):
        det.decision_function(Y)


def test_bad_shapes_and_schema_name_the_argument() -> None:
    X, schema = toy_series()
    with pytest.raises(ValueError, match=r"state_columns names columns \[7\] that X lacks"):
        STARDetector({7: (0, 1)}, small_backbone(), **fast()).fit(X)
    with pytest.raises(ValueError, match="fewer than one window"):
        STARDetector(schema, small_backbone(), **fast()).fit(X[:20])
    det = STARDetector(schema, small_backbone(), **fast()).fit(X)
    with pytest.raises(ValueError, match=r"X has 5 features, but STARDetector is expecting 4"):
        det.decision_function(np.c_[X, X[:, :1]])
    with pytest.raises(ValueError, match="must be 2-D"):
        det.decision_function(X[:, 0])
    with pytest.raises(ValueError, match="fewer than one window"):
        det.decision_function(X[:10])
    with pytest.raises(ValueError, match=r"state_columns\[2\]: the vocabulary has duplicates"):
        STARDetector({2: (0, 0)}, small_backbone(), **fast()).fit(X)
    with pytest.raises(ValueError, match="contamination must be in"):
        STARDetector(schema, small_backbone(), **fast(), contamination=0.9).fit(X)
    with pytest.raises(ValueError, match="target_modules"):
        STARConfig(target_modules="q")
    with pytest.raises(ValueError, match="match none of the backbone's linears"):
        inject_star(small_backbone(), STARConfig(target_modules=("nope",)), n_numeric=1)
    with pytest.raises(NotFittedError, match="not fitted"):  # sklearn's type, as pyod detectors raise
        STARDetector(schema).decision_function(X)


@pytest.mark.parametrize("detector_cls", ["STARDetector", "BackboneDetector", "PerStateDetector"])
def test_detector_defaults_are_the_experiments(detector_cls: str) -> None:
    """One home per default: every detector's windowing and fine-tuning default is the experiment's."""
    import inspect

    from neurips26.methods.star import baselines, integration
    from neurips26.methods.star.experiment import STARExperimentConfig

    cls = getattr(integration, detector_cls, None) or getattr(baselines, detector_cls)
    signature = inspect.signature(cls.__init__)
    experiment = STARExperimentConfig()
    for name in ("window", "n_steps", "batch_size", "lr", "mask_ratio"):
        assert signature.parameters[name].default == getattr(experiment, name), (detector_cls, name)
    for name in ("rank", "alpha", "target_modules"):
        if name in signature.parameters:
            assert signature.parameters[name].default == getattr(experiment.method, name)
