"""SEM-FAS: single-pass evidence measurement for multimodal face anti-spoofing (an ``nn.Module``)."""

from neurips26.methods.semfas.config import SEMFASConfig
from neurips26.methods.semfas.core import BornMeasurement, born_decomposition, fit_temperature
from neurips26.methods.semfas.model import SEMFAS, SEMFASOutput, explain
from neurips26.methods.semfas.training import TrainSettings, fit, modality_dropout, semfas_loss

#: Each central idea -> the test that switches it off and must then fail (pytest node id from the
#: repository root); the README's idea table says how each is switched off.
IDEAS: dict[str, str] = {
    "phases make modalities interfere": (
        "tests/methods/semfas/test_semfas.py::test_phases_change_the_prediction_through_interference"
    ),
    "amplitude is evidence strength: it weights a modality in the measurement": (
        "tests/methods/semfas/test_semfas.py::test_idea_evidence_strength_weights_a_modality_in_the_measurement"
    ),
    "a mixture of heads, not one pure state": (
        "tests/methods/semfas/test_semfas.py::test_single_head_is_a_pure_state_and_several_heads_mix"
    ),
    "a missing modality contributes nothing": (
        "tests/methods/semfas/test_semfas.py::test_missing_modality_has_zero_main_and_pairwise_terms"
    ),
    # the idea as it holds (README, "coverage element"): it does not reliably flag out-of-regime inputs
    "the coverage element pulls in-regime states into the measured subspace": (
        "tests/methods/semfas/test_semfas_experiment.py::"
        "test_coverage_regulariser_pulls_in_regime_states_into_the_measured_subspace"
    ),
}

# Ecosystem families this method's public API belongs to, run by tests/test_conformance.py.
CONFORMANCE: tuple[tuple[str, str], ...] = (("module", "neurips26.methods.semfas.conformance:tiny_model"),)

__all__ = [
    "CONFORMANCE",
    "IDEAS",
    "SEMFAS",
    "BornMeasurement",
    "SEMFASConfig",
    "SEMFASOutput",
    "TrainSettings",
    "born_decomposition",
    "explain",
    "fit",
    "fit_temperature",
    "modality_dropout",
    "semfas_loss",
]
