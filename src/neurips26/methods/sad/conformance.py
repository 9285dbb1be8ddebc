"""Tiny instances for the conformance matrix (``CONFORMANCE`` in this package's ``__init__``)."""

from __future__ import annotations

import numpy as np
import torch

from neurips26.methods.sad.models import Decomposer, Synthesizer
from neurips26.methods.sad.sampler import sample_tasks, step_records
from neurips26.methods.sad.training import StepTensors, encode_records
from neurips26.testing.conformance import ModuleExample


def _steps() -> StepTensors:
    """Encoded single steps of four sampled tasks (programs of 1-2 statements)."""
    return encode_records(step_records(sample_tasks(np.random.default_rng(0), 4, (1, 2))))


def tiny_synthesizer() -> ModuleExample:
    """The statement synthesizer's log-probabilities over candidates, given the GT subgoal."""
    torch.manual_seed(0)
    steps = _steps()
    synthesizer = Synthesizer(d_model=16, heads=2, layers=1, ff=32)
    return ModuleExample(synthesizer, (steps.context, steps.subgoal_block), method="log_probs")


def tiny_decomposer() -> ModuleExample:
    """The subgoal decomposer's teacher-forced logits of the GT subgoal sequence."""
    torch.manual_seed(0)
    steps = _steps()
    decomposer = Decomposer(d_model=16, heads=2, encoder_layers=1, decoder_layers=1, ff=32)
    return ModuleExample(
        decomposer, (steps.decomposer_input(), steps.subgoal_seq), method="teacher_forced_logits"
    )
