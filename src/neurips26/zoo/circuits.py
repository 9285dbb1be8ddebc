"""Circuit initialisation: write a previous-token + (n-gram) induction circuit into a random model.

Route 1 of issue #20. The zoo's pilots stalled on the plateau before content-matching induction forms
(``docs/notes/zoo.md``), so this module writes the circuit by hand *before* training and lets training keep
and refine it (nothing is frozen). The construction (after Olsson et al. 2022, "In-context learning and
induction heads", with the n-gram match of Akyürek et al. 2024) reserves orthogonal blocks of the residual
stream::

    [ 1 constant dim | T: token code | P_1 .. P_n: code of token i - offset_k | O: copied code ]

* the embedding of every token is a constant plus a random unit code in ``T`` (zero elsewhere);
* layer 0, head ``k`` (one per offset) is a **positional head**: query and key read the constant dim and
  fill the high-frequency RoPE pairs so that ``q_i . k_j`` peaks at ``i - j = offset_k`` (for a pair of
  angle ``theta`` the score is ``cos((i - j - offset) theta)``; the sum over pairs has one sharp maximum);
  its value copies ``T`` and its output writes it to ``P_k``;
* a later layer's head 0 is the **induction head**: its query reads ``T, P_1, ..`` (tokens ``i, i-1, ..``)
  and its key ``P_1, P_2, ..`` (tokens ``j-1, j-2, ..``), each feature through its own projection into the
  *slowest* RoPE pairs (rotation <= ``1`` rad over ``max_distance``, so a content match scores the same at
  any distance), so it attends to the token after an earlier occurrence of the last ``n`` tokens; its value
  copies ``T`` and its output writes to ``O``, which the (untied) output embedding reads as that token's
  code: the copied token's logit rises.

Every other weight keeps its random initialisation. Llama and Qwen3 (``rotate_half`` RoPE on the whole
head; Qwen3 also normalises q and k per head, so the strengths go into the ``q_norm`` / ``k_norm`` weights)
and DeepSeek-V3 MLA are supported. In MLA the positional pattern lives in the decoupled RoPE part
(``q_rot`` per head, one shared ``k_rot``), and the content match in the un-rotated ``nope`` part, whose keys
come from the compressed latent: the latent carries the token code (for the values) and one projection of
each ``P_k`` (for the keys), so ``kv_lora_rank >= t + match * m`` and ``qk_nope_head_dim >= match * m``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "CircuitLayout",
    "attention_maps",
    "circuit_report",
    "install_circuit",
    "offset_score",
    "positional_pairs",
    "stable_pairs",
]


@dataclass(frozen=True)
class CircuitLayout:
    """Where the circuit lives and how strong it starts.

    Parameters
    ----------
    token_dims:
        Width ``t`` of the token code block ``T`` (and of each ``P_k`` and ``O``).
    offsets:
        Look-back of each layer-0 positional head (``(1,)`` is the classic previous-token head).
    match:
        How many of the last tokens the induction head matches (``1 <= match <= len(offsets) ...``):
        feature ``k`` compares token ``i - k`` with token ``j - 1 - k``; needs ``offsets[:match] ==
        (1, .., match)`` for the query side and ``offsets`` to contain ``match`` for the key side.
    induction_layer:
        Layer of the induction head (>= 1).
    max_distance:
        Longest look-back the content match must survive (chooses the slow RoPE pairs).
    position_gap:
        Target logit gap (nats) between the positional heads' target and its best competitor.
    match_logit:
        Logit (nats) one matching feature adds to the induction score.
    copy_logit:
        Logit (nats) the copied token gains at the output.
    min_position_freq:
        Only RoPE pairs with angle >= this carry the positional pattern.
    """

    token_dims: int = 48
    offsets: tuple[int, ...] = (1, 2, 3)
    match: int = 3
    induction_layer: int = 1
    max_distance: int = 4096
    position_gap: float = 12.0
    match_logit: float = 6.0
    copy_logit: float = 12.0
    min_position_freq: float = 0.05

    def __post_init__(self) -> None:
        if self.token_dims < 4:
            raise ValueError(f"CircuitLayout.token_dims must be >= 4, got {self.token_dims}")
        if (
            not self.offsets
            or any(o < 1 for o in self.offsets)
            or len(set(self.offsets)) != len(self.offsets)
        ):
            raise ValueError(f"CircuitLayout.offsets must be distinct ints >= 1, got {self.offsets}")
        if not 1 <= self.match <= len(self.offsets) or tuple(self.offsets[: self.match]) != tuple(
            range(1, self.match + 1)
        ):
            raise ValueError(
                f"CircuitLayout.match={self.match} needs offsets to start with 1..match, got {self.offsets}"
            )
        if self.induction_layer < 1:
            raise ValueError(f"CircuitLayout.induction_layer must be >= 1, got {self.induction_layer}")
        for name in ("position_gap", "match_logit", "copy_logit", "min_position_freq"):
            if getattr(self, name) <= 0:
                raise ValueError(f"CircuitLayout.{name} must be > 0, got {getattr(self, name)}")

    def blocks(self) -> dict[str, slice]:
        """Residual-stream blocks: ``const``, ``T``, ``P1`` .. ``Pn``, ``O``."""
        t = self.token_dims
        out = {"const": slice(0, 1), "T": slice(1, 1 + t)}
        start = 1 + t
        for k in range(len(self.offsets)):
            out[f"P{k + 1}"] = slice(start, start + t)
            start += t
        out["O"] = slice(start, start + t)
        return out

    @property
    def width(self) -> int:
        """Residual dims the circuit reserves."""
        return 1 + (len(self.offsets) + 2) * self.token_dims

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


def positional_pairs(inv_freq: np.ndarray, min_freq: float) -> np.ndarray:
    """Indices of the RoPE pairs fast enough (angle >= ``min_freq``) to carry a positional pattern."""
    pairs = np.flatnonzero(np.asarray(inv_freq) >= min_freq)
    if len(pairs) < 2:
        raise ValueError(f"only {len(pairs)} RoPE pairs have angle >= {min_freq}; lower min_position_freq")
    return pairs


def stable_pairs(inv_freq: np.ndarray, max_distance: int) -> np.ndarray:
    """Indices of the RoPE pairs that turn by at most 1 rad over ``max_distance`` (content matching)."""
    return np.flatnonzero(np.asarray(inv_freq) * max_distance <= 1.0)


def offset_score(inv_freq: np.ndarray, pairs: np.ndarray, offset: int, distances: np.ndarray) -> np.ndarray:
    """``S(d) = sum_f cos((d - offset) theta_f)`` over ``pairs``: the positional heads' score shape."""
    theta = np.asarray(inv_freq)[pairs]
    return np.cos((np.asarray(distances)[:, None] - offset) * theta[None, :]).sum(-1)


def _offset_margin(inv_freq: np.ndarray, pairs: np.ndarray, offset: int, max_distance: int) -> float:
    d = np.arange(max_distance)
    s = offset_score(inv_freq, pairs, offset, d)
    return float(s[offset] - np.max(np.delete(s, offset)))


def _unit_codes(rng: np.random.Generator, n: int, dims: int) -> np.ndarray:
    codes = rng.standard_normal((n, dims))
    return codes / np.linalg.norm(codes, axis=1, keepdims=True)


def _orthonormal(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """``rows`` orthonormal rows of length ``cols`` (rows <= cols)."""
    q, _ = np.linalg.qr(rng.standard_normal((cols, rows)))
    return q.T


def _inv_freq(model: Any, rope_dim: int) -> np.ndarray:
    rotary = getattr(model.model, "rotary_emb", None)
    if rotary is not None and hasattr(rotary, "inv_freq") and rotary.inv_freq.numel() == rope_dim // 2:
        return rotary.inv_freq.detach().double().numpy()
    base = float(model.config.rope_parameters["rope_theta"])
    return 1.0 / base ** (np.arange(0, rope_dim, 2) / rope_dim)


def _check_fits(model: Any, layout: CircuitLayout) -> None:
    cfg = model.config
    if layout.width > cfg.hidden_size:
        raise ValueError(
            f"layout needs {layout.width} residual dims (token_dims={layout.token_dims}, "
            f"{len(layout.offsets)} offsets) but hidden_size is {cfg.hidden_size}"
        )
    if layout.induction_layer >= cfg.num_hidden_layers:
        raise ValueError(
            f"induction_layer={layout.induction_layer} but the model has {cfg.num_hidden_layers} layers"
        )
    if getattr(cfg, "tie_word_embeddings", False):
        raise ValueError("the circuit needs an untied output embedding (tie_word_embeddings=False)")


def _heads(model: Any) -> tuple[int, int, int]:
    cfg = model.config
    n_heads = cfg.num_attention_heads
    n_kv = getattr(cfg, "num_key_value_heads", n_heads) or n_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
    return n_heads, n_kv, head_dim


def _rope_rows(head: int, head_dim: int, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (real, imaginary part) of RoPE pairs ``pairs`` of ``head`` (``rotate_half`` layout)."""
    base = head * head_dim
    return base + pairs, base + head_dim // 2 + pairs


def _feature_rows(head: int, head_dim: int, pairs: np.ndarray, n_features: int) -> list[np.ndarray]:
    """Split the rows of the slow RoPE pairs (both parts) of ``head`` into ``n_features`` equal chunks."""
    real, imag = _rope_rows(head, head_dim, pairs)
    rows = np.concatenate([real, imag])
    size = len(rows) // n_features
    if size < 2:
        raise ValueError(
            f"{len(pairs)} slow RoPE pairs cannot carry {n_features} match features; raise rope_theta "
            "or head_dim, or lower max_distance / match"
        )
    return [rows[k * size : (k + 1) * size] for k in range(n_features)]


def install_circuit(model: Any, layout: CircuitLayout | None = None, *, seed: int = 0) -> dict[str, Any]:
    """Write the previous-token heads and the induction head into ``model`` (in place, ``torch.no_grad``).

    Parameters
    ----------
    model:
        A freshly initialised ``LlamaForCausalLM``, ``Qwen3ForCausalLM`` or ``DeepseekV3ForCausalLM`` with
        an untied output embedding; every weight the construction does not name keeps its value.
    layout:
        The circuit's blocks and strengths (default :class:`CircuitLayout`).
    seed:
        Seed of the token codes and projections (a ``numpy`` generator; the torch RNG is not touched).

    Returns
    -------
    dict
        What was written: the heads (layer, head, role), the RoPE pairs used and the layout, for cards.
    """
    layout = layout or CircuitLayout()
    _check_fits(model, layout)
    kind = model.config.model_type
    if kind in ("llama", "qwen3"):
        return _install_rotate_half(model, layout, seed, qk_norm=kind == "qwen3")
    if kind == "deepseek_v3":
        return _install_mla(model, layout, seed)
    raise ValueError(f"model_type {kind!r} is not supported (llama, qwen3, deepseek_v3)")


def _embed_codes(model: Any, layout: CircuitLayout, rng: np.random.Generator) -> np.ndarray:
    """Token codes (unit rows); writes the embedding ``[sqrt(t) | sqrt(t) * code | 0]`` and the output
    embedding's ``O`` block (``code``); returns the codes."""
    import torch

    blocks = layout.blocks()
    t = layout.token_dims
    vocab = model.config.vocab_size
    codes = _unit_codes(rng, vocab, t)
    emb = torch.zeros_like(model.model.embed_tokens.weight)
    emb[:, blocks["const"]] = math.sqrt(t)
    emb[:, blocks["T"]] = torch.from_numpy(codes * math.sqrt(t)).to(emb.dtype)
    model.model.embed_tokens.weight.copy_(emb)
    head = model.lm_head.weight
    head[:, blocks["O"]] = torch.from_numpy(codes).to(head.dtype)
    return codes


def _install_rotate_half(model: Any, layout: CircuitLayout, seed: int, *, qk_norm: bool) -> dict[str, Any]:
    import torch

    rng = np.random.default_rng(seed)
    n_heads, n_kv, head_dim = _heads(model)
    groups = n_heads // n_kv
    n_off = len(layout.offsets)
    if n_off > n_heads:
        raise ValueError(f"{n_off} offsets need {n_off} heads in layer 0; the model has {n_heads}")
    d = model.config.hidden_size
    t = layout.token_dims
    blocks = layout.blocks()
    inv_freq = _inv_freq(model, head_dim)
    pos_pairs = positional_pairs(inv_freq, layout.min_position_freq)
    slow = stable_pairs(inv_freq, layout.max_distance)
    slow = slow[~np.isin(slow, pos_pairs)]
    feature_rows = _feature_rows(0, head_dim, slow, layout.match)
    sqrt_dim = math.sqrt(head_dim)
    heads_written: list[dict[str, Any]] = []
    with torch.no_grad():
        _embed_codes(model, layout, rng)
        # ---- layer 0: positional heads --------------------------------------------------------------
        attn0 = model.model.layers[0].self_attn
        n0 = math.sqrt(d / 2)  # normalised size of the const dim and of the code block at layer 0
        theta = inv_freq[pos_pairs]
        kv_heads = sorted({h // groups for h in range(n_off)})
        for kv in kv_heads:
            rows = slice(kv * head_dim, (kv + 1) * head_dim)
            attn0.k_proj.weight[rows] = 0.0
            attn0.v_proj.weight[rows] = 0.0
            real, _ = _rope_rows(kv, head_dim, pos_pairs)
            attn0.k_proj.weight[real, blocks["const"].start] = 1.0
            attn0.v_proj.weight[kv * head_dim + np.arange(t), blocks["T"].start + np.arange(t)] = 1.0
        for h, offset in enumerate(layout.offsets):
            margin = _offset_margin(inv_freq, pos_pairs, offset, layout.max_distance)
            rows = slice(h * head_dim, (h + 1) * head_dim)
            attn0.q_proj.weight[rows] = 0.0
            real, imag = _rope_rows(h, head_dim, pos_pairs)
            if qk_norm:  # q and k are unit-rms per head after q_norm / k_norm: scale by their weights
                amp = 1.0
                lam = math.sqrt(layout.position_gap * len(pos_pairs) / (sqrt_dim * margin))
                for norm in (attn0.q_norm, attn0.k_norm):
                    norm.weight[pos_pairs] = lam
                    norm.weight[head_dim // 2 + pos_pairs] = lam
            else:  # logit(i - j) = n0^2 * amp * S(i - j) / sqrt(head_dim); the k rows hold 1.0
                amp = layout.position_gap * sqrt_dim / (n0**2 * margin)
            attn0.q_proj.weight[real, blocks["const"].start] = torch.from_numpy(
                amp * np.cos(offset * theta)
            ).to(attn0.q_proj.weight.dtype)
            attn0.q_proj.weight[imag, blocks["const"].start] = torch.from_numpy(
                -amp * np.sin(offset * theta)
            ).to(attn0.q_proj.weight.dtype)
            cols = slice(h * head_dim, (h + 1) * head_dim)
            attn0.o_proj.weight[:, cols] = 0.0
            p = blocks[f"P{h + 1}"]
            attn0.o_proj.weight[p.start + np.arange(t), h * head_dim + np.arange(t)] = math.sqrt(t) / n0
            heads_written.append({"layer": 0, "head": h, "role": f"previous-token (offset {offset})"})
        # ---- induction layer: n-gram induction head (query head 0, kv head 0) -------------------------
        attn = model.model.layers[layout.induction_layer].self_attn
        n1 = math.sqrt(d / ((2 + n_off) * t))  # normalised / raw size of a block at the induction layer
        m = len(feature_rows[0])
        attn.q_proj.weight[:head_dim] = 0.0
        attn.k_proj.weight[:head_dim] = 0.0
        attn.v_proj.weight[:head_dim] = 0.0
        if qk_norm:
            gain = 1.0
            lam = math.sqrt(layout.match_logit * layout.match / sqrt_dim)
            for norm in (attn.q_norm, attn.k_norm):
                norm.weight[torch.from_numpy(np.concatenate(feature_rows))] = lam
        else:
            gain = math.sqrt(layout.match_logit * sqrt_dim / (n1**2 * t * m / t))
        for k, rows in enumerate(feature_rows):
            proj = torch.from_numpy(_orthonormal(rng, m, t) * gain).to(attn.q_proj.weight.dtype)
            src = blocks["T"] if k == 0 else blocks[f"P{k}"]
            attn.q_proj.weight[rows[:, None], np.arange(src.start, src.stop)[None, :]] = proj
            key_src = blocks[f"P{k + 1}"]
            attn.k_proj.weight[rows[:, None], np.arange(key_src.start, key_src.stop)[None, :]] = proj
        attn.v_proj.weight[np.arange(t), blocks["T"].start + np.arange(t)] = 1.0
        attn.o_proj.weight[:, :head_dim] = 0.0
        o = blocks["O"]
        attn.o_proj.weight[o.start + np.arange(t), np.arange(t)] = 1.0 / n1
        heads_written.append(
            {"layer": layout.induction_layer, "head": 0, "role": f"induction ({layout.match}-token match)"}
        )
        # output embedding: the copied code's logit is copy_logit after the final norm
        nf = math.sqrt(d / ((3 + n_off) * t))
        model.lm_head.weight[:, o] *= layout.copy_logit / (nf * math.sqrt(t))
    return {
        "layout": layout.to_dict(),
        "heads": heads_written,
        "positional_pairs": pos_pairs.tolist(),
        "match_pairs": slow.tolist(),
        "seed": seed,
    }


def _pair_dims(pairs: np.ndarray, rope_dim: int, interleave: bool) -> tuple[np.ndarray, np.ndarray]:
    """(real, imaginary) dims of RoPE ``pairs`` inside one rope block (interleaved or ``rotate_half``)."""
    if interleave:
        return 2 * pairs, 2 * pairs + 1
    return pairs, rope_dim // 2 + pairs


def _install_mla(model: Any, layout: CircuitLayout, seed: int) -> dict[str, Any]:
    """The circuit in DeepSeek-V3 MLA (``q_lora_rank=None``): see the module docstring."""
    import torch

    cfg = model.config
    if cfg.q_lora_rank is not None:
        raise ValueError("the MLA circuit needs q_lora_rank=None (a plain query projection)")
    rng = np.random.default_rng(seed)
    n_heads, nope, rope, v_dim = (
        cfg.num_attention_heads,
        cfg.qk_nope_head_dim,
        cfg.qk_rope_head_dim,
        cfg.v_head_dim,
    )
    rank, t, n_off, d = cfg.kv_lora_rank, layout.token_dims, len(layout.offsets), cfg.hidden_size
    qk = nope + rope
    m = min(nope // layout.match, (rank - t) // layout.match)
    if n_off > n_heads or v_dim < t or m < 2:
        raise ValueError(
            f"MLA circuit needs heads >= {n_off}, v_head_dim >= token_dims ({t}) and room for {layout.match} "
            f"features in qk_nope_head_dim ({nope}) and kv_lora_rank - token_dims ({rank - t})"
        )
    blocks = layout.blocks()
    inv_freq = _inv_freq(model, rope)
    pos_pairs = positional_pairs(inv_freq, layout.min_position_freq)
    real, imag = _pair_dims(pos_pairs, rope, cfg.rope_interleave)
    theta = inv_freq[pos_pairs]
    scaling = 1.0 / math.sqrt(qk)
    ar_t = np.arange(t)
    heads_written: list[dict[str, Any]] = []
    with torch.no_grad():
        _embed_codes(model, layout, rng)
        attn0 = model.model.layers[0].self_attn
        n0 = math.sqrt(d / 2)
        kv_a = attn0.kv_a_proj_with_mqa.weight
        kv_a[:] = 0.0  # latent = token code only; shared k_rot = the constant
        kv_a[ar_t, blocks["T"].start + ar_t] = 1.0
        kv_a[rank + real, blocks["const"].start] = 1.0
        for h, offset in enumerate(layout.offsets):
            margin = _offset_margin(inv_freq, pos_pairs, offset, layout.max_distance)
            amp = layout.position_gap / (n0**2 * margin * scaling)
            base = h * qk
            attn0.q_proj.weight[base : base + qk] = 0.0
            col = blocks["const"].start
            dtype = attn0.q_proj.weight.dtype
            attn0.q_proj.weight[base + nope + real, col] = torch.from_numpy(amp * np.cos(offset * theta)).to(
                dtype
            )
            attn0.q_proj.weight[base + nope + imag, col] = torch.from_numpy(-amp * np.sin(offset * theta)).to(
                dtype
            )
            vrow = h * (nope + v_dim) + nope
            attn0.kv_b_proj.weight[vrow : vrow + v_dim] = 0.0
            attn0.kv_b_proj.weight[vrow + ar_t, ar_t] = 1.0
            attn0.o_proj.weight[:, h * v_dim : (h + 1) * v_dim] = 0.0
            p = blocks[f"P{h + 1}"]
            attn0.o_proj.weight[p.start + ar_t, h * v_dim + ar_t] = math.sqrt(t / rank)
            heads_written.append({"layer": 0, "head": h, "role": f"previous-token (offset {offset})"})
        attn = model.model.layers[layout.induction_layer].self_attn
        n1 = math.sqrt(d / ((2 + n_off) * t))
        kv_a = attn.kv_a_proj_with_mqa.weight
        kv_a[:rank] = 0.0
        kv_a[ar_t, blocks["T"].start + ar_t] = 1.0
        attn.q_proj.weight[:qk] = 0.0
        attn.kv_b_proj.weight[: nope + v_dim] = 0.0
        used = t + layout.match * m  # the latent's rms is n1 * sqrt(used / rank) of a raw block's
        lat = math.sqrt(rank / used) / n1  # normalised latent = raw latent * lat
        gain = layout.match_logit / (n1 * math.sqrt(m) * math.sqrt(m) * n1 * lat * scaling)
        for k in range(layout.match):
            proj = _orthonormal(rng, m, t)
            rows = t + k * m + np.arange(m)
            key_src = blocks[f"P{k + 1}"]
            kv_a[rows[:, None], np.arange(key_src.start, key_src.stop)[None, :]] = torch.from_numpy(proj).to(
                kv_a.dtype
            )
            attn.kv_b_proj.weight[k * m + np.arange(m), rows] = 1.0
            src = blocks["T"] if k == 0 else blocks[f"P{k}"]
            q_rows = k * m + np.arange(m)
            attn.q_proj.weight[q_rows[:, None], np.arange(src.start, src.stop)[None, :]] = torch.from_numpy(
                proj * gain
            ).to(kv_a.dtype)
        attn.kv_b_proj.weight[nope + ar_t, ar_t] = 1.0
        attn.o_proj.weight[:, :v_dim] = 0.0
        o = blocks["O"]
        attn.o_proj.weight[o.start + ar_t, ar_t] = 1.0 / (n1 * lat)
        heads_written.append(
            {"layer": layout.induction_layer, "head": 0, "role": f"induction ({layout.match}-token match)"}
        )
        nf = math.sqrt(d / ((3 + n_off) * t))
        model.lm_head.weight[:, o] *= layout.copy_logit / (nf * math.sqrt(t))
    return {
        "layout": layout.to_dict(),
        "heads": heads_written,
        "positional_pairs": pos_pairs.tolist(),
        "match_dims_per_feature": m,
        "seed": seed,
    }


def attention_maps(model: Any, input_ids: Any) -> list[np.ndarray]:
    """Attention weights per layer, ``[batch, heads, queries, keys]`` (one eager forward pass)."""
    import torch

    ids = torch.as_tensor(input_ids)
    if ids.ndim == 1:
        ids = ids[None]
    previous = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = model(input_ids=ids, output_attentions=True)
    finally:
        model.set_attn_implementation(previous)
    return [a.float().numpy() for a in out.attentions]


def random_repeats(vocab_size: int, period: int, length: int, n: int, seed: int = 0) -> np.ndarray:
    """``n`` rows of ``length`` tokens: a chunk of ``period`` distinct random tokens, repeated (never 0)."""
    if not 2 <= period <= length // 2:
        raise ValueError(f"period must be in [2, length/2], got period={period}, length={length}")
    rng = np.random.default_rng([seed, period, length])
    rows = [
        np.resize(rng.choice(np.arange(1, vocab_size), size=period, replace=False), length) for _ in range(n)
    ]
    return np.stack(rows)


def _row_entropy(a: np.ndarray) -> np.ndarray:
    """Normalised entropy of each attention row ``[..., q, k]`` (0: one key, 1: uniform over visible)."""
    a = np.clip(a, 1e-30, None)
    h = -(a * np.log(a)).sum(-1)
    visible = np.arange(1, a.shape[-1] + 1, dtype=np.float64)
    return h[..., 1:] / np.log(visible[1:])


def circuit_report(
    model: Any, info: dict[str, Any], *, period: int = 32, length: int = 256
) -> dict[str, Any]:
    """How the constructed heads attend on random tokens repeated with ``period`` (4 rows).

    For each written head: ``target_mass`` (mean attention on its target: token ``i - offset`` for a
    positional head, the tokens after the earlier occurrences of token ``i`` for the induction head, over
    the queries that have a target), ``entropy`` (mean normalised row entropy over the same queries) and
    ``copy_acc`` (the model's next-token accuracy on the repeats, once per report).
    """
    import torch

    ids = random_repeats(model.config.vocab_size, period, length, 4, seed=7)
    maps = attention_maps(model, ids)
    rows = np.arange(length)
    heads = []
    for spec in info["heads"]:
        a = maps[spec["layer"]][:, spec["head"]]
        if spec["role"].startswith("previous-token"):
            offset = int(spec["role"].split("offset ")[1].rstrip(")"))
            q = rows[offset:]
            target = q - offset
            mass = a[:, q, target].mean()
        else:  # every earlier occurrence counts: keys j <= i with j = i + 1 (mod period)
            q = rows[period:]
            hit = ((q[:, None] - rows[None, :]) % period == period - 1) & (rows[None, :] <= q[:, None])
            mass = (a[:, q, :] * hit[None]).sum(-1).mean()
        ent = _row_entropy(a)[:, q - 1].mean()
        heads.append({**spec, "target_mass": float(mass), "entropy": float(ent)})
    with torch.no_grad():
        pred = model(input_ids=torch.as_tensor(ids)).logits.argmax(-1).numpy()
    copy = float((pred[:, period - 1 : -1] == ids[:, period:]).mean())
    return {"period": period, "length": length, "heads": heads, "copy_acc": copy}
