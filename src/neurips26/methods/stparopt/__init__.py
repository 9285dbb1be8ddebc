"""STParOpt: uncertainty-aware C-to-CUDA parallelisation with execution stride features.

``analyze(source, function)`` gives per-loop verdicts (probability of being parallel, static entropy,
whether execution evidence was used, strategies, reasons); ``translate(source, function)`` emits CUDA
kernels and a host launcher; the generated code runs on CPU through ``runtime/stparopt_cuda.h``.
"""

from neurips26.methods.stparopt.config import STParOptConfig
from neurips26.methods.stparopt.cudagen import CudaTranslation, LoopPlan, translate_function
from neurips26.methods.stparopt.frontend import CFunction, Loop, parse_function, pycparser_loops
from neurips26.methods.stparopt.pipeline import LoopReport, analyze, load_model, save_model, translate
from neurips26.methods.stparopt.programs import ArgSpec, LoopProgram
from neurips26.methods.stparopt.verify import VerifyItem, nvcc_compile, verify_on_cpu

#: Each central idea -> the test that switches it off and must then fail (pytest node id, from the
#: repository root); the README's "Central ideas" table says how each is switched off.
IDEAS: dict[str, str] = {
    "execution stride evidence resolves what the source cannot": (
        "tests/methods/stparopt/test_stparopt_model.py::test_idea_analyze_resolves_the_scatter_from_execution_evidence"
    ),
    "entropy-guided fusion: evidence only where the static branch is uncertain": (
        "tests/methods/stparopt/test_stparopt_model.py::test_idea_analyze_profiles_and_fuses_only_where_the_source_is_uncertain"
    ),
}

# Ecosystem families this method's public API belongs to, run by tests/test_conformance.py.
CONFORMANCE: tuple[tuple[str, str], ...] = (("module", "neurips26.methods.stparopt.conformance:tiny_model"),)

__all__ = [
    "CONFORMANCE",
    "IDEAS",
    "ArgSpec",
    "CFunction",
    "CudaTranslation",
    "Loop",
    "LoopPlan",
    "LoopProgram",
    "LoopReport",
    "STParOptConfig",
    "VerifyItem",
    "analyze",
    "load_model",
    "nvcc_compile",
    "parse_function",
    "pycparser_loops",
    "save_model",
    "translate",
    "translate_function",
    "verify_on_cpu",
]
