"""SAD: Solver-Aware Decomposition for programming by example (DeepCoder DSL, decomposer, synthesizer).

Public API: the DSL (:mod:`.dsl`), the batched executor, the task sampler and splits, the two models,
``train_sad`` and the end-to-end search.
"""

from neurips26.methods.sad.config import SADConfig
from neurips26.methods.sad.dsl import (
    DSLParseError,
    DSLTypeError,
    Program,
    Statement,
    format_program,
    parse_program,
    parse_state,
    parse_value,
    program_output,
    run_program,
)
from neurips26.methods.sad.executor import CANDIDATES, execute, make_states
from neurips26.methods.sad.models import Decomposer, SolverScorer, SynthContext, Synthesizer
from neurips26.methods.sad.sampler import (
    Task,
    check_exedec_records,
    make_split,
    sample_task,
    sample_tasks,
    step_records,
    task_from_exedec,
)
from neurips26.methods.sad.search import enumerative_search, synthesize
from neurips26.methods.sad.training import (
    encode_records,
    paired_rewards,
    sad_loss,
    scst_advantage,
    train_sad,
    train_supervised,
    train_synthesizer,
)

#: Each central idea -> the test that switches it off and must then fail (pytest node id from the
#: repository root); the README's idea table says how each is switched off.
IDEAS: dict[str, str] = {
    "SAD trains the decomposer on the solver's reward (train_sad climbs it)": (
        "tests/methods/sad/test_sad_training.py::test_idea_train_sad_climbs_the_solvers_reward"
    ),
    "the RL term changes the update; with it off SAD is SL": (
        "tests/methods/sad/test_sad_training.py::test_rl_weight_zero_and_no_entropy_is_sl_bit_for_bit"
    ),
    "the reward comes from the solver: subgoals it can act on score higher": (
        "tests/methods/sad/test_sad_experiment.py::test_reward_idea_off_subgoal_blind_solver_cannot_rank"
    ),
}

# Ecosystem families this method's public API belongs to, run by tests/test_conformance.py.
CONFORMANCE: tuple[tuple[str, str], ...] = (
    ("module", "neurips26.methods.sad.conformance:tiny_synthesizer"),
    ("module", "neurips26.methods.sad.conformance:tiny_decomposer"),
)

__all__ = [
    "CANDIDATES",
    "CONFORMANCE",
    "IDEAS",
    "DSLParseError",
    "DSLTypeError",
    "Decomposer",
    "Program",
    "SADConfig",
    "SolverScorer",
    "Statement",
    "SynthContext",
    "Synthesizer",
    "Task",
    "check_exedec_records",
    "encode_records",
    "enumerative_search",
    "execute",
    "format_program",
    "make_split",
    "make_states",
    "paired_rewards",
    "parse_program",
    "parse_state",
    "parse_value",
    "program_output",
    "run_program",
    "sad_loss",
    "sample_task",
    "sample_tasks",
    "scst_advantage",
    "step_records",
    "synthesize",
    "task_from_exedec",
    "train_sad",
    "train_supervised",
    "train_synthesizer",
]
