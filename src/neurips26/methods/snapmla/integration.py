"""SnapMLA: Efficient Long-Context MLA Decoding via Hardware-Aware FP8 Quantized Pipelining — HF glue.

transformers' ``DeepseekV3Attention`` up-projects keys and values before its cache and attention
interface see them, so an attention function registered through ``AttentionInterface`` never receives
the latent. The robust plug-in point on transformers 5.x is therefore the attention module's ``forward``:

- :class:`LatentMLACache`, a ``transformers.Cache`` whose layers hold the encoded latent (c_KV, k_R) of a
  :class:`DecodeRecipe` (FP8 codes + scales for SnapMLA) and report its length to ``generate``;
- :func:`use_latent_mla`, a context manager that swaps every MLA attention's ``forward`` for
  :func:`latent_mla_forward` (absorbed decode over the latent cache) and restores it on exit.

>>> with use_latent_mla(model, SNAPMLA):                                          # doctest: +SKIP
...     out = model.generate(ids, past_key_values=LatentMLACache(model.config, SNAPMLA), max_new_tokens=8)
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from typing import Any

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

from neurips26.methods.snapmla.cache_format import EncodedLatent, bytes_per_token, concat_encoded
from neurips26.methods.snapmla.core import absorb_query, project_latent_output, split_kv_b_weight
from neurips26.methods.snapmla.pipeline import DecodeRecipe, decode_latent_attention

__all__ = [
    "LatentMLACache",
    "LatentMLALayer",
    "capture_latents",
    "latent_mla_forward",
    "mla_attention_modules",
    "rescale_rope_projection",
    "use_latent_mla",
]

_REQUIRED_ATTRIBUTES = ("kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj", "o_proj")


class LatentMLALayer(CacheLayerMixin):
    """One layer's latent cache: an :class:`EncodedLatent` grown by :meth:`append`.

    A per-tensor (static) FP8 scale is calibrated on the first append (the prefill) and then held fixed;
    later tokens beyond it are clamped and counted in ``overflow``.
    """

    is_sliding = False
    is_compileable = False

    def __init__(self, recipe: DecodeRecipe) -> None:
        super().__init__()
        self.recipe = recipe
        self.encoded: EncodedLatent | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        raise NotImplementedError("LatentMLALayer stores latents; run the model inside use_latent_mla()")

    def update(self, key_states: Any, value_states: Any, cache_kwargs: Any = None) -> Any:
        raise NotImplementedError(
            "LatentMLACache holds the MLA latent, not expanded keys/values: run the model inside "
            "neurips26.methods.snapmla.use_latent_mla(model, recipe)"
        )

    def append(self, content: torch.Tensor, rope: torch.Tensor) -> EncodedLatent:
        """Fused-K-Append: encode (c, k_R) of the new tokens and append them; returns the whole cache."""
        static = None
        if self.encoded is not None and self.recipe.kv_format == "fp8_tensor_joint":
            static = self.encoded.scale
        new = self.recipe.encode(content, rope, static_scale=static)
        self.encoded = new if self.encoded is None else concat_encoded(self.encoded, new)
        self.is_initialized = True
        return self.encoded

    def get_seq_length(self) -> int:
        return 0 if self.encoded is None else self.encoded.num_tokens

    def get_mask_sizes(self, cache_position: torch.Tensor) -> tuple[int, int]:
        return self.get_seq_length() + cache_position.shape[0], 0

    def get_max_cache_shape(self) -> int:
        return -1

    def offload(self) -> None:  # latent caches stay where they are
        return None

    def prefetch(self) -> None:
        return None

    def reset(self) -> None:
        self.encoded = None
        self.is_initialized = False

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        raise NotImplementedError("beam search is not supported by LatentMLACache")


class LatentMLACache(Cache):
    """A ``transformers.Cache`` of MLA latents in a recipe's format (one :class:`LatentMLALayer` per layer).

    Parameters
    ----------
    config: the model's config (``num_hidden_layers``, ``kv_lora_rank``, ``qk_rope_head_dim``).
    recipe: the decode recipe whose cache format is stored.
    """

    def __init__(self, config: Any, recipe: DecodeRecipe) -> None:
        for name in ("num_hidden_layers", "kv_lora_rank", "qk_rope_head_dim"):
            if not hasattr(config, name):
                raise TypeError(
                    f"config has no {name!r}: LatentMLACache needs an MLA (DeepSeek-V2/V3) config"
                )
        super().__init__(layers=[LatentMLALayer(recipe) for _ in range(config.num_hidden_layers)])
        self.recipe = recipe
        self.kv_lora_rank = int(config.kv_lora_rank)
        self.qk_rope_head_dim = int(config.qk_rope_head_dim)

    def append(self, layer_idx: int, content: torch.Tensor, rope: torch.Tensor) -> EncodedLatent:
        if content.shape[-1] != self.kv_lora_rank or rope.shape[-1] != self.qk_rope_head_dim:
            raise ValueError(
                f"latent dims (content {content.shape[-1]}, rope {rope.shape[-1]}) do not match the cache "
                f"layout (kv_lora_rank {self.kv_lora_rank}, qk_rope_head_dim {self.qk_rope_head_dim})"
            )
        return self.layers[layer_idx].append(content, rope)

    @property
    def overflow(self) -> int:
        """FP8 values clamped at +-448 so far, over all layers."""
        return sum(layer.encoded.overflow for layer in self.layers if layer.encoded is not None)

    def bytes_per_token(self) -> int:
        """Cache bytes per token over all layers in this recipe's format."""
        per_layer = bytes_per_token(
            self.recipe.kv_format, self.kv_lora_rank, self.qk_rope_head_dim, self.recipe.n_tiles
        )
        return per_layer * len(self.layers)


def mla_attention_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """Every MLA attention module of a DeepSeek-V2/V3-style model; TypeError for a non-MLA model."""
    found = [m for m in model.modules() if all(hasattr(m, a) for a in _REQUIRED_ATTRIBUTES)]
    if not found:
        raise TypeError(
            f"{type(model).__name__} has no MLA attention (modules with {', '.join(_REQUIRED_ATTRIBUTES)}); "
            "SnapMLA applies to DeepSeek-V2/V3-class models"
        )
    return found


def _apply_rope(
    module: torch.nn.Module, q_rot: torch.Tensor, k_rot: torch.Tensor, position_embeddings: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's own RoPE on (q_R, k_R), so positions match exactly: DeepSeek-V3 passes ``(cos, sin)``
    (interleaved or half-split per ``rope_interleave``), DeepSeek-V2 one complex ``freqs_cis`` tensor."""
    import importlib

    modeling = importlib.import_module(type(module).__module__)
    if isinstance(position_embeddings, torch.Tensor):  # DeepSeek-V2's complex rotation
        return modeling.apply_rotary_emb(q_rot, k_rot, position_embeddings.to(q_rot.device))
    cos, sin = position_embeddings
    interleave = getattr(module.config, "rope_interleave", False)
    name = "apply_rotary_pos_emb_interleave" if interleave else "apply_rotary_pos_emb"
    return getattr(modeling, name)(q_rot, k_rot, cos, sin)


def _additive_mask(
    attention_mask: torch.Tensor | None, n_query: int, total: int, dtype: torch.dtype, device: torch.device
) -> torch.Tensor | None:
    """The model's 4D mask when it covers all cached tokens, else a causal mask by position."""
    if isinstance(attention_mask, torch.Tensor) and attention_mask.ndim == 4:
        mask = attention_mask[..., -n_query:, :total]
        if mask.shape[-1] == total:
            if mask.dtype == torch.bool:
                return torch.zeros(mask.shape, dtype=dtype, device=device).masked_fill(~mask, float("-inf"))
            return mask.to(dtype)
    if n_query == 1:
        return None
    past = total - n_query
    query_pos = torch.arange(n_query, device=device).unsqueeze(-1) + past
    allowed = torch.arange(total, device=device).unsqueeze(0) <= query_pos
    return torch.zeros(n_query, total, dtype=dtype, device=device).masked_fill(~allowed, float("-inf"))


def _require_causal_mask(mask: torch.Tensor | None, n_query: int, total: int) -> None:
    """The Triton kernel builds the causal decode mask in; any other mask (padding) is refused."""
    if mask is None:
        return
    positions = torch.arange(total, device=mask.device)
    causal = positions[None, :] <= (total - n_query + torch.arange(n_query, device=mask.device))[:, None]
    visible = mask > -1e30  # -inf or the dtype's minimum
    if not bool((visible == causal).all()):
        raise ValueError(
            "kernel='triton' supports plain causal attention only (no padding or custom masks); "
            "use kernel='reference' for this batch"
        )


def _shadow_latent_cache(module: torch.nn.Module, host: Cache, recipe: DecodeRecipe) -> LatentMLACache:
    """The latent store riding on a cache that transformers created itself (e.g. ``DynamicCache`` in
    ``generate`` or a plain forward): the host keeps one-wide placeholders per token so that its
    ``get_seq_length`` stays right, and the latents live here."""
    shadow = getattr(host, "_snapmla_latent", None)
    if shadow is None or shadow.recipe != recipe:
        if host.get_seq_length() > 0:
            raise ValueError(
                "past_key_values already holds tokens computed outside use_latent_mla; start from an empty "
                "cache or pass a LatentMLACache"
            )
        shadow = LatentMLACache(module.config, recipe)
        host._snapmla_latent = shadow
    return shadow


def latent_mla_forward(
    self: torch.nn.Module,
    hidden_states: torch.Tensor,
    position_embeddings: tuple[torch.Tensor, torch.Tensor] | torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    past_key_values: Cache | None = None,
    cache_position: torch.Tensor | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Absorbed MLA attention over a latent cache; a drop-in ``forward`` for ``DeepseekV3Attention`` and
    ``DeepseekV2Attention``.

    The latent c = RMSNorm(W_DKV h) and the RoPE key k_R are appended to the cache in the recipe's format;
    queries are absorbed (q~ = W_UK^T q^C) and the recipe's kernel attends over the cache; the latent
    output goes through W_UV and ``o_proj``. Without a cache (``use_cache=False``) the prompt's own
    latents are encoded and attended (the same numbers as decoding it token by token). A cache that
    transformers created itself (``DynamicCache``) gets a latent store attached and only one-wide
    placeholders in its own tensors.
    """
    recipe: DecodeRecipe = self._snapmla_recipe
    batch, n_query = hidden_states.shape[:2]
    heads, d_nope, d_rope = self.num_heads, self.qk_nope_head_dim, self.qk_rope_head_dim
    if self.q_lora_rank is None:
        q_states = self.q_proj(hidden_states)
    else:
        q_states = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(hidden_states)))
    q_states = q_states.view(batch, n_query, heads, d_nope + d_rope).transpose(1, 2)
    q_nope, q_rot = torch.split(q_states, [d_nope, d_rope], dim=-1)
    latent, k_rot = torch.split(self.kv_a_proj_with_mqa(hidden_states), [self.kv_lora_rank, d_rope], dim=-1)
    latent = self.kv_a_layernorm(latent)
    q_rot, k_rot = _apply_rope(self, q_rot, k_rot.view(batch, 1, n_query, d_rope), position_embeddings)
    k_rot = k_rot[:, 0]

    if isinstance(past_key_values, LatentMLACache):
        encoded = past_key_values.append(self.layer_idx, latent, k_rot)
    elif past_key_values is None:
        encoded = recipe.encode(latent, k_rot)
    elif isinstance(past_key_values, Cache):
        encoded = _shadow_latent_cache(self, past_key_values, recipe).append(self.layer_idx, latent, k_rot)
        placeholder = latent.new_zeros(batch, 1, n_query, 1)  # keeps the host cache's length right
        past_key_values.update(placeholder, placeholder, self.layer_idx)
    else:
        raise TypeError(
            f"past_key_values must be a transformers Cache or None, got {type(past_key_values).__name__}"
        )
    w_uk, w_uv = split_kv_b_weight(self.kv_b_proj.weight, heads, d_nope, self.v_head_dim)
    q_latent = absorb_query(q_nope.float(), w_uk.float())
    mask = _additive_mask(attention_mask, n_query, encoded.num_tokens, torch.float32, hidden_states.device)
    capture = getattr(self, "_snapmla_capture", None)
    if capture is not None:
        capture.append(
            {"q_content": q_latent, "q_rope": q_rot.float(), "content": latent.float(), "rope": k_rot.float()}
        )
    if getattr(self, "_snapmla_kernel", "reference") == "triton":
        from neurips26.methods.snapmla.triton_kernel import snapmla_decode_triton

        _require_causal_mask(mask, n_query, encoded.num_tokens)
        o_latent = snapmla_decode_triton(q_latent, q_rot, encoded, self.scaling, recipe=recipe)
    else:
        o_latent = decode_latent_attention(recipe, q_latent, q_rot, encoded, self.scaling, mask)
    out = project_latent_output(o_latent, w_uv.float()).to(hidden_states.dtype)
    out = out.transpose(1, 2).reshape(batch, n_query, heads * self.v_head_dim)
    return self.o_proj(out), None


@contextlib.contextmanager
def use_latent_mla(
    model: torch.nn.Module, recipe: DecodeRecipe, *, kernel: str = "reference"
) -> Iterator[torch.nn.Module]:
    """Run ``model``'s MLA attentions through :func:`latent_mla_forward` with ``recipe`` inside the block.

    ``kernel="reference"`` (default) runs the PyTorch reference; ``kernel="triton"`` the Triton decode
    kernel (CUDA tensors, or CPU tensors under ``TRITON_INTERPRET=1``; SnapMLA and BF16 recipes; causal
    masks only). Raises TypeError for a model without MLA attention. The original ``forward`` methods are
    restored on exit, even after an exception.
    """
    if not isinstance(recipe, DecodeRecipe):
        raise TypeError(f"recipe must be a DecodeRecipe, got {type(recipe).__name__}")
    if kernel not in ("reference", "triton"):
        raise ValueError(f"kernel={kernel!r} is not allowed; choose 'reference' or 'triton'")
    modules = mla_attention_modules(model)
    for module in modules:
        module._snapmla_recipe = recipe
        module._snapmla_kernel = kernel
        module.forward = types.MethodType(latent_mla_forward, module)
    try:
        yield model
    finally:
        for module in modules:
            del module.forward  # the instance attribute shadowed the class's forward
            del module._snapmla_recipe
            del module._snapmla_kernel


@torch.no_grad()
def capture_latents(model: torch.nn.Module, input_ids: torch.Tensor) -> list[dict[str, torch.Tensor]]:
    """Per layer: absorbed queries, latents and RoPE keys of one full-precision pass over ``input_ids``.

    Each entry holds ``q_content`` (B, H, T, d_c), ``q_rope`` (B, H, T, d_r), ``content`` (B, T, d_c),
    ``rope`` (B, T, d_r), ``scaling`` and ``w_uv`` (H, d_v, d_c): everything the kernel-level metrics need.
    """
    from neurips26.methods.snapmla.baselines import FP32

    modules = mla_attention_modules(model)
    records: list[list[dict[str, Any]]] = [[] for _ in modules]
    with use_latent_mla(model, FP32):
        for module, record in zip(modules, records, strict=True):
            module._snapmla_capture = record
        try:
            model(input_ids, use_cache=False)
        finally:
            for module in modules:
                del module._snapmla_capture
    layers = []
    for module, record in zip(modules, records, strict=True):
        entry = dict(record[0])
        _, w_uv = split_kv_b_weight(
            module.kv_b_proj.weight, module.num_heads, module.qk_nope_head_dim, module.v_head_dim
        )
        entry["w_uv"] = w_uv.detach().float()
        entry["scaling"] = float(module.scaling)
        layers.append(entry)
    return layers


@torch.no_grad()
def rescale_rope_projection(model: torch.nn.Module, gain: float) -> torch.nn.Module:
    """Multiply every layer's RoPE key projection by ``gain`` and its RoPE query projection by ``1/gain``.

    RoPE is linear, so ``(q_R / g) . (g k_R) = q_R . k_R``: the model computes the same function (bit for
    bit when ``gain`` is a power of two) while its cached k_R spans ``gain`` times the range. This injects
    the content/RoPE heterogeneity that trained DeepSeek models show (RoPE keys around 1e3 versus a
    latent around 1e1) into a tiny model that lacks it. Modifies ``model`` in place and returns it.
    """
    if not (isinstance(gain, (int, float)) and gain > 0):
        raise ValueError(f"gain must be a positive number, got {gain!r}")
    for module in mla_attention_modules(model):
        d_c, d_nope, d_rope = module.kv_lora_rank, module.qk_nope_head_dim, module.qk_rope_head_dim
        module.kv_a_proj_with_mqa.weight[d_c:] *= gain
        if module.kv_a_proj_with_mqa.bias is not None:
            module.kv_a_proj_with_mqa.bias[d_c:] *= gain
        q_linear = module.q_proj if module.q_lora_rank is None else module.q_b_proj
        rows = q_linear.weight.view(module.num_heads, d_nope + d_rope, -1)
        rows[:, d_nope:] /= gain
    return model
