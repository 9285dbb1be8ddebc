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

#: Each central idea -> the test that switches it off and must then fail (pytest node id from the
#: repository root); the README's idea table says how each is switched off.
IDEAS: dict[str, str] = {
    "stability weighting keeps flipping samples out of the prototypes": (
        "tests/methods/sast/test_sast.py::test_idea_stability_weighting_keeps_flipping_samples_out_of_the_prototypes"
    ),
    "the trainer builds SWIP prototypes from the stable samples": (
        "tests/methods/sast/test_sast.py::test_idea_trainer_builds_swip_prototypes_from_stable_samples"
    ),
    "SWIP prototypes sit on the visual clusters": (
        "tests/methods/sast/test_sast.py::test_idea_swip_prototypes_sit_on_the_visual_clusters"
    ),
    "text refinement separates the most-flipped class pair": (
        "tests/methods/sast/test_sast.py::test_idea_text_refinement_separates_the_most_flipped_pair"
    ),
    "adaptive fusion follows the sharper stream": (
        "tests/methods/sast/test_sast.py::test_idea_adaptive_fusion_trusts_the_confident_stream"
    ),
}

# Ecosystem families this method's public API belongs to, run by tests/test_conformance.py.
CONFORMANCE: tuple[tuple[str, str], ...] = (
    ("module", "neurips26.methods.sast.conformance:tiny_backbone"),
    ("module", "neurips26.methods.sast.conformance:tiny_classifier"),
)

__all__ = [
    "CONFORMANCE",
    "CPL",
    "GRIP",
    "IDEAS",
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
