"""SAST: Stability-Aware Self-Training for CLIP, with a flip ledger every self-training method can log.

Public API: :class:`SASTTrainer` (``adapt(target, setting, labels)`` returns an ``nn.Module``),
:class:`SASTConfig`, :class:`FlipLedger`, the :class:`VLMBackbone` protocol with
:class:`MiniCLIPBackbone` and :class:`HFCLIPBackbone`, and the re-implemented baselines.
"""

from neurips26.methods.sast.backbone import HFCLIPBackbone, MiniCLIPBackbone, VLMBackbone, check_backbone
from neurips26.methods.sast.baselines import (
    CPL,
    GRIP,
    FixedPseudoLabels,
    LaFTer,
    RandomFlips,
    ReCLIP,
    ZeroShot,
)
from neurips26.methods.sast.config import SASTConfig
from neurips26.methods.sast.ledger import FlipLedger
from neurips26.methods.sast.trainer import CachedFeatures, SASTClassifier, SASTTrainer, SelfTrainer

__all__ = [
    "CPL",
    "GRIP",
    "CachedFeatures",
    "FixedPseudoLabels",
    "FlipLedger",
    "HFCLIPBackbone",
    "LaFTer",
    "MiniCLIPBackbone",
    "RandomFlips",
    "ReCLIP",
    "SASTClassifier",
    "SASTConfig",
    "SASTTrainer",
    "SelfTrainer",
    "VLMBackbone",
    "ZeroShot",
    "check_backbone",
]
