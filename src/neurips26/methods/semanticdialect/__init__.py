"""SemanticDialect: block-wise mixed-format W4A4 quantization for video diffusion transformers.

Public API: the codec (``Formatbook``, ``quantize_blocks``, ``dequantize_blocks``, ``pack``/``unpack``),
SeDA and decomposition (``SemanticDialectQuantizer``), and the torchao-style verb
``quantize_(model, SemanticDialectConfig(...))`` with its ``temporal_report``.
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
from neurips26.methods.semanticdialect.integration import FormatConfig, quantize_, temporal_report
from neurips26.methods.semanticdialect.packing import PackedTensor, pack, unpack
from neurips26.methods.semanticdialect.semantic import (
    SemanticDialectQuantizer,
    TokenContext,
    assign_subbooks,
    salient_tokens,
)

__all__ = [
    "DIALECT_FP4",
    "E2M1",
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
    "pack",
    "quantize_",
    "quantize_blocks",
    "salient_tokens",
    "selection_error_bound",
    "temporal_report",
    "unpack",
]
