"""ScreenSearch: ambiguity-aware exploration of desktop and web applications over one deduplicated graph.

Public API: backends (:class:`SyntheticGUI`, ``AtspiApp``, ``WebApp`` in ``backends``), retrieval and dedup
(:class:`ScreenIndex`, :func:`structural_tokens`), the graph (:class:`StateGraph`), the ambiguity signal
(:class:`AmbiguityEstimator`), the policy (:class:`ScreenSearchPolicy`) and the loop (:class:`Explorer`).
"""

from neurips26.methods.screensearch.ambiguity import AmbiguityEstimator, matched_outcome_entropy
from neurips26.methods.screensearch.backends import Backend, BackendCrashed, BackendUnavailable
from neurips26.methods.screensearch.backends.synthetic import SyntheticGUI, SyntheticWorldSpec
from neurips26.methods.screensearch.baselines import BFSPolicy, DFSPolicy, NoveltyUCTPolicy, RandomPolicy
from neurips26.methods.screensearch.config import ScreenSearchConfig
from neurips26.methods.screensearch.explorer import Act, Explorer, ExploreStats, Replay
from neurips26.methods.screensearch.graph import GraphFormatError, StateGraph
from neurips26.methods.screensearch.index import ScreenIndex
from neurips26.methods.screensearch.policy import ScreenSearchPolicy
from neurips26.methods.screensearch.prior import ProposalPrior
from neurips26.methods.screensearch.screen import Action, Element, Screen, structural_tokens

__all__ = [
    "Act",
    "Action",
    "AmbiguityEstimator",
    "BFSPolicy",
    "Backend",
    "BackendCrashed",
    "BackendUnavailable",
    "DFSPolicy",
    "Element",
    "ExploreStats",
    "Explorer",
    "GraphFormatError",
    "NoveltyUCTPolicy",
    "ProposalPrior",
    "RandomPolicy",
    "Replay",
    "Screen",
    "ScreenIndex",
    "ScreenSearchConfig",
    "ScreenSearchPolicy",
    "StateGraph",
    "SyntheticGUI",
    "SyntheticWorldSpec",
    "matched_outcome_entropy",
    "structural_tokens",
]
