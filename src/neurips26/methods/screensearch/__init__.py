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

#: Each central idea -> the test that switches it off and must then fail (pytest node id from the
#: repository root); the README's idea table says how each is switched off.
IDEAS: dict[str, str] = {
    "volatile-attribute filter before tokenising": (
        "tests/methods/screensearch/test_screensearch.py::test_idea_off_volatile_filter_splits_the_same_screen"
    ),
    "matched similar screens pool their outcomes into the ambiguity signal": (
        "tests/methods/screensearch/test_screensearch.py::test_idea_similar_screens_pool_their_outcomes_through_the_explorer"
    ),
    "repeat-probe separation of noise from aliasing": (
        "tests/methods/screensearch/test_screensearch.py::test_idea_off_noise_separation_flags_noise_as_ambiguity"
    ),
    "ambiguity in Q (vs frontier-only)": (
        "tests/methods/screensearch/test_screensearch.py::test_idea_off_ambiguity_changes_the_search_with_hidden_state"
    ),
    "ambiguity in the local action values: re-probe where it stands": (
        "tests/methods/screensearch/test_screensearch.py::test_idea_the_policy_re_probes_an_ambiguous_action_where_it_stands"
    ),
    "proposal prior": (
        "tests/methods/screensearch/test_screensearch.py::test_idea_off_prior_lowers_discovery"
    ),
    "content-only changes are not ambiguity (real apps)": (
        "tests/methods/screensearch/test_screensearch_apps.py::test_idea_off_content_masking_reads_a_display_change_as_ambiguity"
    ),
}

# tests/test_conformance.py: no ecosystem API family fits this method's public API.
CONFORMANCE: tuple[tuple[str, str], ...] = ()
CONFORMANCE_REASON: str = (
    "ScreenSearch explores GUIs through its own Backend protocol and exports networkx GraphML (checked "
    "in its tests); no ecosystem API family describes an explorer."
)

__all__ = [
    "CONFORMANCE",
    "CONFORMANCE_REASON",
    "IDEAS",
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
