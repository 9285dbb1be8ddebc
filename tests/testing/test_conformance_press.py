"""The press tester passes kvpress's own KnormPress and fails each deliberately broken press."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

pytest.importorskip("kvpress")

from kvpress import KnormPress

from neurips26.testing.conformance import TESTERS

check_press = TESTERS["press"]


@dataclass
class _KeepsEverything(KnormPress):
    """Ignores the ratio: the cache is never compressed."""

    def compress(self, module, hidden_states, keys, values, attentions, kwargs):
        return keys, values


@dataclass
class _DropsAtZero(KnormPress):
    """Drops the first token even at compression_ratio=0."""

    def compress(self, module, hidden_states, keys, values, attentions, kwargs):
        keys, values = super().compress(module, hidden_states, keys, values, attentions, kwargs)
        return (keys[:, :, 1:], values[:, :, 1:]) if self.compression_ratio == 0 else (keys, values)


@dataclass
class _LeaksHooks(KnormPress):
    """Registers its hooks and never removes them."""

    def __call__(self, model):
        from contextlib import nullcontext

        for layer in model.model.layers:
            layer.self_attn.register_forward_hook(self.forward_hook, with_kwargs=True)
        return nullcontext()


@dataclass
class _AcceptsAnyRatio(KnormPress):
    def __post_init__(self):
        pass


class _NotADataclass:
    compression_ratio = 0.5

    def __call__(self, model):
        raise NotImplementedError


def test_kvpress_knorm_press_conforms():
    check_press(lambda: KnormPress(compression_ratio=0.5))


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (_KeepsEverything, "must keep"),
        (_DropsAtZero, "compression_ratio=0"),
        (_LeaksHooks, "left forward hooks"),
        (_AcceptsAnyRatio, "was accepted"),
    ],
)
def test_broken_presses_fail(broken, message):
    with pytest.raises(AssertionError, match=message):
        check_press(lambda: broken(compression_ratio=0.5))


def test_a_press_that_is_not_a_dataclass_fails():
    with pytest.raises(AssertionError, match="dataclass with a compression_ratio"):
        check_press(_NotADataclass)
