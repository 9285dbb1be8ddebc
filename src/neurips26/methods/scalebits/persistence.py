"""ScaleBITS: Scalable Bitwidth Search for Hardware-Aligned Mixed-Precision LLMs -- save and reload.

A quantized model's ``state_dict`` holds the packed streams of every :class:`ScaleBitsLinear` (``tile_ids``,
``codes_{b}``, ``zeros_{b}``, ``scales``, ...), whose byte sizes depend on the allocation, so a stock
``from_pretrained`` cannot rebuild the layers: it would build plain ``nn.Linear`` layers, report their
weights missing and initialise them at random. The round trip is therefore:

* :func:`save_quantized` -- ``save_pretrained`` with a ``quantization_config`` in ``config.json``:
  ``quant_method="scalebits"`` and one spec per packed layer (shape, bit set, tile, group size, tiles per
  width, gather sides);
* :func:`load_quantized` -- builds the stock model from the saved config, swaps every listed layer for an
  empty :class:`ScaleBitsLinear` with buffers of the saved sizes, and loads the saved tensors strictly;
* a stock ``AutoModelForCausalLM.from_pretrained`` of such a folder raises (``ScaleBitsHfQuantizer``,
  registered with transformers when this package is imported) and names :func:`load_quantized`;
  :func:`check_no_packed_weights` refuses a state dict with packed streams loaded into plain layers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from neurips26.methods.scalebits.core import index_bits, padded_shape, replace_module
from neurips26.methods.scalebits.packed import ScaleBitsLinear

__all__ = [
    "FORMAT_VERSION",
    "QUANT_METHOD",
    "check_no_packed_weights",
    "empty_packed_layer",
    "install_packed_layers",
    "layer_specs",
    "load_quantized",
    "packed_layer_spec",
    "save_quantized",
    "scalebits_quantization_config",
]

QUANT_METHOD = "scalebits"
FORMAT_VERSION = 1
# buffer names only ScaleBitsLinear has: their presence in a checkpoint means packed layers
_PACKED_MARKERS = ("tile_ids", "scales")


def _stream_bytes(count: int, width: int) -> int:
    """Bytes of :func:`core.pack_bits` for ``count`` values of ``width`` bits."""
    return 0 if width == 0 or count == 0 else -(-count * width // 8)


def packed_layer_spec(layer: ScaleBitsLinear) -> dict[str, Any]:
    """Everything needed to rebuild ``layer``'s buffers with the right sizes (not its values)."""
    return {
        "in_features": layer.in_features,
        "out_features": layer.out_features,
        "bit_set": list(layer.bit_set),
        "tile": list(layer.tile),
        "group_size": layer.group_size,
        "tile_counts": {str(bits): count for bits, count in layer.tile_counts.items()},
        "float_zeros": layer.float_zeros,
        "gathers": list(layer.gathers),
        "bias": layer.bias is not None,
    }


def empty_packed_layer(spec: dict[str, Any]) -> ScaleBitsLinear:
    """A :class:`ScaleBitsLinear` whose buffers have ``spec``'s sizes and zero contents (to load into)."""
    rows, cols = int(spec["out_features"]), int(spec["in_features"])
    bit_set = tuple(int(b) for b in spec["bit_set"])
    tile = (int(spec["tile"][0]), int(spec["tile"][1]))
    group_size = int(spec["group_size"])
    counts = {int(bits): int(count) for bits, count in spec["tile_counts"].items()}
    layer = ScaleBitsLinear(cols, rows, bit_set, tile, group_size, counts)
    stored = padded_shape((rows, cols), tile)
    layer.stored_shape = stored
    layer.float_zeros = bool(spec["float_zeros"])
    layer.gathers = (bool(spec["gathers"][0]), bool(spec["gathers"][1]))
    tile_rows, tile_cols = tile

    def register(name: str, numel: int) -> None:
        layer.register_stream(name, torch.zeros(numel, dtype=torch.uint8))

    register("tile_ids", _stream_bytes(sum(counts.values()), index_bits(len(bit_set))))
    for bits in bit_set:
        register(f"codes_{bits}", _stream_bytes(counts[bits] * tile_rows * tile_cols, bits))
        if not layer.float_zeros:
            zeros = counts[bits] * tile_rows * (tile_cols // group_size)
            register(f"zeros_{bits}", _stream_bytes(zeros, bits))
    layer.register_buffer("scales", torch.zeros(stored[0], stored[1] // group_size, dtype=torch.float16))
    if layer.float_zeros:
        layer.register_buffer("zeros_fp16", torch.zeros_like(layer.scales))
    if spec["bias"]:
        layer.bias = nn.Parameter(torch.zeros(rows), requires_grad=False)
    for side, stored_flag, length in (("input", layer.gathers[0], cols), ("output", layer.gathers[1], rows)):
        if stored_flag:
            register(f"{side}_order", _stream_bytes(length, index_bits(length)))
    return layer


def _packed_layers(model: nn.Module) -> dict[str, ScaleBitsLinear]:
    return {name: m for name, m in model.named_modules() if isinstance(m, ScaleBitsLinear)}


def scalebits_quantization_config(model: nn.Module) -> dict[str, Any]:
    """The ``quantization_config`` dict of a quantized model: method, format version and layer specs."""
    layers = _packed_layers(model)
    if not layers:
        raise ValueError(
            f"{type(model).__name__} has no ScaleBitsLinear layer: run quantize_and_report first"
        )
    return {
        "quant_method": QUANT_METHOD,
        "format_version": FORMAT_VERSION,
        "layers": {name: packed_layer_spec(layer) for name, layer in layers.items()},
    }


def save_quantized(model: Any, folder: str | Path, **save_kwargs: Any) -> Path:
    """Save a transformers model quantized by ``quantize_and_report`` so that it reloads exactly
    (:func:`load_quantized`, or
    ``from_pretrained`` once this package is imported).

    ``save_pretrained``'s files, with ``config.json`` carrying a ``quantization_config``
    (``quant_method="scalebits"`` and one spec per packed layer). Raises ValueError for a model without
    packed layers.
    """
    quantization_config = scalebits_quantization_config(model)
    folder = Path(folder)
    previous = getattr(model.config, "quantization_config", None)
    model.config.quantization_config = quantization_config
    try:
        model.save_pretrained(folder, **save_kwargs)
    finally:
        if previous is None:
            del model.config.quantization_config
        else:
            model.config.quantization_config = previous
    return folder


def layer_specs(quantization_config: Any) -> dict[str, dict[str, Any]]:
    """The per-layer specs of a saved ``quantization_config`` (dict or config object); checks its version."""
    payload = quantization_config if isinstance(quantization_config, dict) else vars(quantization_config)
    if payload.get("quant_method") != QUANT_METHOD:
        raise ValueError(
            f"quantization_config has quant_method {payload.get('quant_method')!r}, not {QUANT_METHOD!r}"
        )
    if payload.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"quantization_config has format_version {payload.get('format_version')!r}; "
            f"this version of neurips26 reads {FORMAT_VERSION}"
        )
    return payload["layers"]


def install_packed_layers(model: nn.Module, specs: dict[str, dict[str, Any]]) -> None:
    """Swap every layer named in ``specs`` for an empty :class:`ScaleBitsLinear` of the saved sizes."""
    for name, spec in specs.items():
        replace_module(model, name, empty_packed_layer(spec))


def load_quantized(folder: str | Path, model_class: Any = None, **config_kwargs: Any) -> Any:
    """The model :func:`save_quantized` wrote to ``folder``, packed layers restored bit for bit (eval mode).

    ``model_class`` (default ``AutoModelForCausalLM``) builds the architecture from the saved config;
    every layer listed in its ``quantization_config`` becomes an empty :class:`ScaleBitsLinear` of the
    saved sizes and all saved tensors are loaded strictly (a missing or unexpected tensor is an error).
    """
    from transformers import AutoConfig, AutoModelForCausalLM

    folder = Path(folder)
    config = AutoConfig.from_pretrained(folder, **config_kwargs)
    saved = getattr(config, "quantization_config", None)
    if saved is None:
        raise ValueError(
            f"{folder}/config.json has no quantization_config: it was not written by save_quantized"
        )
    specs = layer_specs(saved)
    del config.quantization_config  # the stock constructor must not look for a transformers quantizer
    builder = model_class if model_class is not None else AutoModelForCausalLM
    model = builder.from_config(config) if hasattr(builder, "from_config") else builder(config)
    install_packed_layers(model, specs)
    state = _saved_state_dict(folder)
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = _tied_parameter_names(model)
    missing = [key for key in missing if key not in tied]
    if missing or unexpected:
        raise ValueError(
            f"{folder} does not match its quantization_config: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}"
        )
    model.tie_weights()
    model.config.quantization_config = saved
    return model.eval()


def _saved_state_dict(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder} holds no .safetensors weights (save_quantized writes them)")
    state: dict[str, torch.Tensor] = {}
    for file in files:
        state.update(load_file(file))
    return state


def _tied_parameter_names(model: nn.Module) -> set[str]:
    """Names of parameters that share storage with an earlier one (save_pretrained writes them once)."""
    seen: dict[int, str] = {}
    tied = set()
    for name, parameter in model.named_parameters(remove_duplicate=False):
        key = id(parameter)
        if key in seen:
            tied.add(name)
        else:
            seen[key] = name
    return tied


def check_no_packed_weights(state_dict: dict[str, torch.Tensor], model: nn.Module) -> None:
    """Raise ValueError when ``state_dict`` holds packed ScaleBITS streams for layers ``model`` has as plain
    ``nn.Linear``: loading it would leave those weights at their random initial values."""
    plain = {name for name, m in model.named_modules() if type(m) is nn.Linear}
    packed = sorted(
        prefix
        for key in state_dict
        for prefix, _, leaf in [key.rpartition(".")]
        if leaf in _PACKED_MARKERS and prefix in plain
    )
    if packed:
        raise ValueError(
            f"the checkpoint holds packed ScaleBITS layers ({', '.join(packed[:3])}, ...) but the model has "
            "plain nn.Linear layers there: load it with neurips26.methods.scalebits.load_quantized(folder)"
        )
