"""SemanticDialect: block-wise mixed-format W4A4 quantization for video diffusion transformers.

Public API: the codec (``Formatbook``, ``quantize_blocks``, ``dequantize_blocks``, ``pack``/``unpack``),
SeDA and decomposition (``SemanticDialectQuantizer``), and the in-place verb
``fake_quantize_dit_(model, SemanticDialectConfig(...))`` with its ``temporal_report`` (``quantize_`` is its
deprecated alias: it is not torchao's verb).
"""

from neurips26.methods.semanticdialect.codec import (
    BlockQuantized,
    build_lut,
    dequantize_blocks,
    quantize_blocks,
    selection_error_bound,
)
from neurips26.methods.semanticdialect.config import SemanticDialectConfig
from neurips26.methods.semanticdialect.formatbook import DIALECT_FP4, E2M1, Formatbook
from neurips26.methods.semanticdialect.integration import (
    FormatConfig,
    fake_quantize_dit_,
    quantize_,
    temporal_report,
)
from neurips26.methods.semanticdialect.packing import PackedTensor, pack, unpack
from neurips26.methods.semanticdialect.semantic import (
    SemanticDialectQuantizer,
    TokenContext,
    assign_subbooks,
    salient_tokens,
)

#: Each central idea -> the test that switches it off and must then fail (pytest node id from the
#: repository root); the README's idea table says how each is switched off.
IDEAS: dict[str, str] = {
    "LUT selection is never worse than the intermediate-grid bound": (
        "tests/methods/semanticdialect/test_semanticdialect.py::test_idea_off_lut_selection_without_the_lut_errors_breaks_the_bound"
    ),
    "a larger formatbook lowers the error": (
        "tests/methods/semanticdialect/test_semanticdialect.py::test_more_dialects_lower_the_error"
    ),
    "decomposition: a residual 4-bit term on the salient rows only": (
        "tests/methods/semanticdialect/test_semanticdialect_integration.py::test_decomposition_raises_the_salient_rows_sqnr_and_only_theirs"
    ),
    "the salient rows are the tokens receiving the most attention": (
        "tests/methods/semanticdialect/test_semanticdialect_integration.py::test_idea_decomposed_rows_are_the_tokens_receiving_the_most_attention"
    ),
    "SeDA: shared sub-books make formats agree across frames": (
        "tests/methods/semanticdialect/test_semanticdialect_integration.py::test_idea_off_seda_with_clusters_ignored_fails_the_agreement_test"
    ),
}

#: Ecosystem families the public API conforms to (``neurips26.testing.conformance``): a model-level verb
#: (fake_quantize_dit_), not torchao's per-module quantize_.
CONFORMANCE: tuple[tuple[str, str], ...] = (
    ("quantizer", "neurips26.methods.semanticdialect.conformance:tiny_quantizer"),
)

__all__ = [
    "CONFORMANCE",
    "DIALECT_FP4",
    "E2M1",
    "IDEAS",
    "BlockQuantized",
    "FormatConfig",
    "Formatbook",
    "PackedTensor",
    "SemanticDialectConfig",
    "SemanticDialectQuantizer",
    "TokenContext",
    "assign_subbooks",
    "build_lut",
    "dequantize_blocks",
    "fake_quantize_dit_",
    "pack",
    "quantize_",
    "quantize_blocks",
    "salient_tokens",
    "selection_error_bound",
    "temporal_report",
    "unpack",
]
