"""SEM-FAS: single-pass evidence measurement for multimodal face anti-spoofing (an ``nn.Module``)."""

from neurips26.methods.semfas.config import SEMFASConfig
from neurips26.methods.semfas.core import BornMeasurement, born_decomposition, fit_temperature
from neurips26.methods.semfas.model import SEMFAS, SEMFASOutput, explain
from neurips26.methods.semfas.training import TrainSettings, fit, modality_dropout, semfas_loss

__all__ = [
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
