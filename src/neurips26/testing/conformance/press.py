"""The kvpress press family: a dataclass press with ``compression_ratio``, used as ``with press(model):``.

What kvpress users rely on (``kvpress.presses.base_press.BasePress``):

- ``press(model)`` is a context manager that hooks the attention layers and removes every hook on exit;
- ``compression_ratio`` is the fraction of the prefill cache removed; ``compression_ratio=0`` changes
  nothing (same logits, same greedy tokens as no press);
- at ratio ``r`` a prefill of ``n`` tokens keeps ``n_layers * compute_n_kept(n, r)`` entries in all
  (a press may move budget between layers, not add to it);
- ``model.generate`` runs under the press, and decoding steps are not compressed again;
- a ratio outside ``[0, 1)`` is rejected with a message that names the compression ratio.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any

import torch

PROMPT_TOKENS = 256
NEW_TOKENS = 3
RATIOS = (0.25, 0.5)


def _variant(press: Any, ratio: float) -> Any:
    return dataclasses.replace(press, compression_ratio=ratio)


def _hook_counts(model: Any) -> list[int]:
    from neurips26.methods.spectralkv.press_eval import decoder_layers

    return [len(layer.self_attn._forward_hooks) for layer in decoder_layers(model)]


def _prefill(model: Any, ids: torch.Tensor, press: Any | None) -> tuple[torch.Tensor, Any]:
    from transformers import DynamicCache

    cache = DynamicCache()
    context = press(model) if press is not None else contextlib.nullcontext()
    with torch.no_grad(), context:
        logits = model(ids, past_key_values=cache, use_cache=True).logits[:, -1]
    return logits, cache


def _generate(model: Any, ids: torch.Tensor, press: Any | None) -> torch.Tensor:
    context = press(model) if press is not None else contextlib.nullcontext()
    with torch.no_grad(), context:
        return model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS, do_sample=False
        )


def _cached_tokens(cache: Any) -> list[int]:
    return [int(layer.keys.shape[2]) for layer in cache.layers]


def _check_shape(press: Any) -> None:
    assert callable(press), f"a press must be callable as press(model); {type(press).__name__} is not"
    assert dataclasses.is_dataclass(press) and any(
        f.name == "compression_ratio" for f in dataclasses.fields(press)
    ), (
        f"{type(press).__name__} must be a dataclass with a compression_ratio field (kvpress convention): "
        "kvpress's pipeline and benchmarks build variants with dataclasses.replace"
    )


def _check_bad_ratios(press: Any) -> None:
    for ratio in (-0.1, 1.5):
        try:
            _variant(press, ratio)
        except Exception as error:  # kvpress itself asserts; ours raise ValueError
            assert "compression" in str(error).lower(), (
                f"compression_ratio={ratio} is rejected, but the message does not name the ratio: {error!r}"
            )
        else:
            raise AssertionError(
                f"{type(press).__name__}(compression_ratio={ratio}) was accepted; must raise"
            )


def _check_ratio_zero_is_no_press(model: Any, ids: torch.Tensor, press: Any) -> None:
    plain_logits, plain_cache = _prefill(model, ids, None)
    logits, cache = _prefill(model, ids, _variant(press, 0.0))
    assert _cached_tokens(cache) == _cached_tokens(plain_cache), (
        f"compression_ratio=0 must keep the whole cache: kept {_cached_tokens(cache)} of "
        f"{_cached_tokens(plain_cache)} tokens per layer"
    )
    torch.testing.assert_close(
        logits, plain_logits, atol=1e-5, rtol=1e-5, msg="compression_ratio=0 changed the logits"
    )
    same = torch.equal(_generate(model, ids, _variant(press, 0.0)), _generate(model, ids, None))
    assert same, "compression_ratio=0 changed the greedy tokens of model.generate"


def _check_kept_counts(model: Any, ids: torch.Tensor, press: Any) -> None:
    from kvpress.utils import compute_n_kept

    n = ids.shape[1]
    for ratio in RATIOS:
        _, cache = _prefill(model, ids, _variant(press, ratio))
        kept = _cached_tokens(cache)
        expected = len(kept) * compute_n_kept(n, ratio)
        assert sum(kept) == expected, (
            f"compression_ratio={ratio} on {n} tokens must keep {expected} cache entries over {len(kept)} "
            f"layers (kvpress's compute_n_kept per layer); kept {kept}"
        )


def _check_hooks_removed(model: Any, ids: torch.Tensor, press: Any) -> None:
    before = _hook_counts(model)
    _prefill(model, ids, _variant(press, RATIOS[-1]))
    assert _hook_counts(model) == before, (
        f"the press left forward hooks on the attention layers after its context closed: {before} -> "
        f"{_hook_counts(model)}"
    )


def _check_generate(model: Any, ids: torch.Tensor, press: Any) -> None:
    out = _generate(model, ids, _variant(press, RATIOS[-1]))
    expected = (ids.shape[0], ids.shape[1] + NEW_TOKENS)
    assert out.shape == expected, f"generate under the press gave shape {tuple(out.shape)}, not {expected}"


def check_press(factory: Callable[[], Any]) -> None:
    """Run the kvpress contract on ``factory()`` (a press) over a tiny stock Llama built from its config."""
    from neurips26.testing.stock_models import VOCAB, tiny_stock_model

    press = factory()
    _check_shape(press)
    _check_bad_ratios(press)
    model = tiny_stock_model("llama")
    ids = torch.randint(1, VOCAB, (1, PROMPT_TOKENS), generator=torch.Generator().manual_seed(0))
    _check_hooks_removed(model, ids, press)
    _check_ratio_zero_is_no_press(model, ids, press)
    _check_kept_counts(model, ids, press)
    _check_generate(model, ids, press)
