"""The two learned parts of decomposition-based PBE: a decomposer (seq2seq) and a scoring synthesizer.

* :class:`Decomposer` — a small ``torch.nn.Transformer``. Its encoder reads each example's program state
  and output (see :mod:`.tokens`); its decoder attends to all examples' encodings at once and generates
  the next subgoal, the next step's value on every example, token by token. It can therefore propose
  subgoals that are malformed, or well-formed but hard for the synthesizer: the phenomenon SAD targets.
* :class:`Synthesizer` — reads each example's variables and a target (a subgoal, or the task output for
  the no-decomposition baseline) as one vector per value (a slot MLP), mixes them with a Transformer
  encoder and scores **every** candidate statement of :mod:`.executor` in one pass:
  ``logit(op, lambda, a, b) = s_f(h) + q_{f,0}(h)·v_a + q_{f,1}(h)·v_b`` with ``h`` the pooled target
  encoding and ``v_a`` the encoding of variable ``a``'s slot, which carries its embedded relation
  features to the target (:mod:`.relations`); type-incorrect candidates are masked. Its log-softmax
  gives the exact cross-entropy of the GT statement (SAD's reward) and a beam for free.

Both satisfy :class:`SolverScorer` / the decomposer API used by :mod:`.training` and :mod:`.search`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn

from neurips26.methods.sad import dsl
from neurips26.methods.sad import tokens as tok
from neurips26.methods.sad.executor import CANDIDATES, KIND_ABSENT, CandidateSpace
from neurips26.methods.sad.relations import NUM_RELATION_FEATURES, relation_features

MAX_POSITIONS = 128
TARGET_POSITION = 5 * (1 + tok.VALUE_TOKENS)  # the target block starts here, whatever the state's width


def layout_positions(state_width: int, target_width: int, device: torch.device | None = None) -> torch.Tensor:
    """Position ids of a ``state + target`` sequence whose target block always sits at
    ``TARGET_POSITION``: the first five variable slots take positions ``0..39``, the target ``40..48``,
    and variable slots 5-9 (longer programs) ``49..88``. Padding a state wider therefore never moves a
    token's position."""
    state = torch.arange(state_width, device=device)
    state = torch.where(state < TARGET_POSITION, state, state + target_width)
    target = TARGET_POSITION + torch.arange(target_width, device=device)
    return torch.cat([state, target])


def pack_live(pad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Pack every row's live (non-padding) positions of ``pad [R, L]`` to the front: ``order [R, W]``
    (original position of each packed slot, ``W`` = the most live positions of any row) and the packed
    padding mask ``[R, W]``."""
    order = torch.argsort(pad.to(torch.int8), dim=1, stable=True)
    width = max(int((~pad).sum(1).max()), 1) if pad.numel() else 1
    order = order[:, :width]
    return order, pad.gather(1, order)


MAX_SUBGOAL_TOKENS = 3 * tok.VALUE_TOKENS + 3  # three list values, two separators, EOS
VARIABLE_SLOT = 1 + tok.VALUE_TOKENS  # a variable's fixed slot in a state: its name, then its value


@dataclass
class SynthContext:
    """What a synthesizer sees besides its target: ``state [N, E, S]`` tokens (every variable in its fixed
    8-token slot) and ``kinds [N, V]`` (0 absent, 1 int, 2 list)."""

    state: torch.Tensor
    kinds: torch.Tensor

    def __len__(self) -> int:
        return self.state.shape[0]

    def index(self, rows: torch.Tensor) -> SynthContext:
        return SynthContext(self.state[rows], self.kinds[rows])


class SolverScorer(Protocol):
    """Any frozen solver that can drive SAD training: the log-likelihood of a statement given a context
    and a (possibly malformed) subgoal token sequence."""

    def score(self, context: SynthContext, subgoal: torch.Tensor, statement: torch.Tensor) -> torch.Tensor:
        """``[N]`` log p(statement | context, subgoal); ``subgoal`` is ``[N, T]`` decomposer tokens."""
        ...


def _encoder(d_model: int, heads: int, layers: int, ff: int) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(d_model, heads, ff, dropout=0.0, batch_first=True, norm_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


def _mlp(inputs: int, d_model: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, 2 * d_model), nn.GELU(), nn.Linear(2 * d_model, d_model))


def _check_tokens(name: str, tokens: torch.Tensor, vocab_size: int) -> None:
    if tokens.dtype != torch.long:
        raise TypeError(f"{name} must be a long tensor of token ids, got {tokens.dtype}")
    if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= vocab_size):
        raise ValueError(
            f"{name} holds token ids outside this model's vocabulary [0, {vocab_size}) "
            f"(min {int(tokens.min())}, max {int(tokens.max())}): decomposer/synthesizer vocabulary mismatch?"
        )


class Synthesizer(nn.Module):
    """A frozen-able scoring synthesizer over the enumerated statement space (see module doc).

    Each example is read as a handful of *value slots*: every program variable's fixed 8-token slot
    (name, then ``[`` elements ``]`` or the int) and the target block each become one vector through an
    MLP over their concatenated token embeddings (element ``k`` of a list always lands on the same
    input weights, as in DeepCoder's value encoder), the variables' slots plus their embedded relation
    features (:mod:`.relations`) to the target. A Transformer encoder then mixes the ``V + 1`` slots of
    one example (absent variables masked); the target slot and the mean of the live slots give the
    example's summary ``h``, each variable's slot its encoding ``v_a``, both averaged over examples.

    Parameters
    ----------
    d_model, heads, layers, ff:
        Transformer encoder size over the slots (ours: 64 wide, 2 layers).
    token_dim:
        Embedding width of one token inside a slot (the slot MLP reads ``8 * token_dim`` inputs).
    vocab_size:
        Token vocabulary (``tokens.VOCAB_SIZE``); a checkpoint with another vocabulary fails loudly.
    relations:
        Add :func:`relation_features` (embedded) to each variable's slot (ours: the calibration lever,
        see README).
    """

    def __init__(
        self,
        d_model: int = 64,
        heads: int = 4,
        layers: int = 2,
        ff: int = 128,
        token_dim: int = 24,
        vocab_size: int = tok.VOCAB_SIZE,
        space: CandidateSpace = CANDIDATES,
        relations: bool = True,
    ) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.embed = nn.Embedding(vocab_size, token_dim)
        self.variable_slot = _mlp(VARIABLE_SLOT * token_dim, d_model)
        self.target_slot = _mlp((1 + tok.TARGET_TOKENS) * token_dim, d_model)
        self.encoder = _encoder(d_model, heads, layers, ff)
        self.relations = (
            nn.Sequential(nn.Linear(NUM_RELATION_FEATURES, d_model), nn.GELU(), nn.Linear(d_model, d_model))
            if relations
            else None
        )
        self.pool = nn.Sequential(nn.Linear(2 * d_model, d_model), nn.GELU(), nn.Linear(d_model, d_model))
        n_functions = len(space.functions)
        self.function_embed = nn.Embedding(n_functions, d_model)
        self.function_score = nn.Linear(d_model, 1)
        self.arg_hidden = nn.Linear(d_model, d_model)
        self.arg_query = nn.Linear(d_model, 2 * d_model)
        self.register_buffer("cand_function", torch.as_tensor(space.function), persistent=False)
        self.register_buffer("cand_arg0", torch.as_tensor(space.arg0), persistent=False)
        self.register_buffer("cand_arg1", torch.as_tensor(space.arg1), persistent=False)
        self.register_buffer("cand_kind0", torch.as_tensor(space.kind0), persistent=False)
        self.register_buffer("cand_kind1", torch.as_tensor(space.kind1), persistent=False)
        # flat index of each candidate's terms in ``args [N, F, 2, V]`` (one gather instead of three
        # broadcast advanced-indexing reads); the second argument of a unary candidate reads a zero
        second = torch.where(self.cand_arg1 >= 0, self.cand_arg1, 0)
        self.register_buffer(
            "cand_first", (self.cand_function * 2) * dsl.MAX_VARIABLES + self.cand_arg0, persistent=False
        )
        self.register_buffer(
            "cand_second", (self.cand_function * 2 + 1) * dsl.MAX_VARIABLES + second, persistent=False
        )
        self.d_model = d_model

    def type_mask(self, kinds: torch.Tensor) -> torch.Tensor:
        """``[N, C]`` bool: the candidate's arguments exist with the right kinds."""
        ok0 = kinds.index_select(1, self.cand_arg0) == self.cand_kind0
        second = kinds.index_select(1, self.cand_arg1.clamp(min=0)) == self.cand_kind1
        return ok0 & torch.where(self.cand_arg1 >= 0, second, True)

    def encode(self, context: SynthContext, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The pooled target encoding ``h [N, d]`` and the variables' encodings ``[N, 10, d]`` (absent
        variables are zero); ``target`` is ``[N, E, 1 + TARGET_TOKENS]`` (``OUT`` then its tokens)."""
        _check_tokens("state", context.state, self.vocab_size)
        _check_tokens("target", target, self.vocab_size)
        n, e, s = context.state.shape
        if s % VARIABLE_SLOT or s > tok.state_width(dsl.MAX_VARIABLES):
            raise ValueError(
                f"state width {s} must be a multiple of {VARIABLE_SLOT} tokens, at most "
                f"{tok.state_width(dsl.MAX_VARIABLES)} (ten variables)"
            )
        if target.shape != (n, e, 1 + tok.TARGET_TOKENS):
            expected, got = (n, e, 1 + tok.TARGET_TOKENS), tuple(target.shape)
            raise ValueError(f"target must be [N, E, 1 + TARGET_TOKENS] = {expected}, got {got}")
        v = s // VARIABLE_SLOT
        variables = self.variable_slot(self.embed(context.state.reshape(n, e, v, VARIABLE_SLOT)).flatten(-2))
        if self.relations is not None:
            # the features are float32 by construction; follow the model's dtype (after .double() etc.)
            features = relation_features(context.state, target).to(variables.dtype)
            variables = variables + self.relations(features)
        goal = self.target_slot(self.embed(target).flatten(-2))[:, :, None]
        absent = torch.cat([context.kinds[:, :v] == KIND_ABSENT, context.kinds.new_zeros(n, 1).bool()], 1)
        hidden = self.encoder(
            torch.cat([variables, goal], 2).reshape(n * e, v + 1, -1),
            src_key_padding_mask=absent.repeat_interleave(e, 0),
        ).reshape(n, e, v + 1, -1)
        live = (~absent)[:, None, :, None].float()
        mean_h = (hidden * live).sum(2) / live.sum(2)
        h = self.pool(torch.cat([hidden[:, :, v], mean_h], -1)).mean(1)  # [N, d]
        var_h = (hidden[:, :, :v] * live[:, :, :v]).mean(1)  # [N, V, d]
        return h, nn.functional.pad(var_h, (0, 0, 0, dsl.MAX_VARIABLES - v))

    def components(
        self, context: SynthContext, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The parts of every candidate's logit: ``func [N, F]``, ``args [N, F, 2, 10]`` and the type
        mask ``[N, C]`` (``target`` as in :meth:`encode`)."""
        h, var_h = self.encode(context, target)
        n = h.shape[0]
        fe = self.function_embed.weight  # [F, d]
        func = self.function_score(torch.nn.functional.gelu(h[:, None] + fe[None])).squeeze(-1)  # [N, F]
        hf = torch.nn.functional.gelu(self.arg_hidden(h)[:, None] + fe[None])  # [N, F, d]
        q = self.arg_query(hf).reshape(n, -1, 2, self.d_model)
        args = torch.einsum("nfjd,nvd->nfjv", q, var_h) / math.sqrt(self.d_model)
        return func, args, self.type_mask(context.kinds)

    def log_probs(self, context: SynthContext, target: torch.Tensor) -> torch.Tensor:
        """``[N, C]`` log p(candidate | state, target) over all candidates; masked ones are ``-inf``."""
        func, args, mask = self.components(context, target)
        flat = args.flatten(1)  # index_select: several times faster than advanced indexing here
        second = torch.where(self.cand_arg1 >= 0, flat.index_select(1, self.cand_second), 0.0)
        logits = func.index_select(1, self.cand_function) + flat.index_select(1, self.cand_first) + second
        return torch.log_softmax(logits.masked_fill(~mask, float("-inf")), dim=-1)

    def score(self, context: SynthContext, subgoal: torch.Tensor, statement: torch.Tensor) -> torch.Tensor:
        """:class:`SolverScorer`: ``[N]`` log p(statement | context, subgoal tokens ``[N, T]``)."""
        target = tok.chunk_subgoal_tokens(subgoal, context.state.shape[1])
        lp = self.log_probs(context, target)
        return lp.gather(1, statement[:, None]).squeeze(1)


def kinds_present(kinds: torch.Tensor) -> torch.Tensor:
    return kinds != KIND_ABSENT


class Decomposer(nn.Module):
    """Seq2seq subgoal model on ``torch.nn.Transformer`` (per-example encoder, joint decoder).

    Parameters
    ----------
    d_model, heads, encoder_layers, decoder_layers, ff:
        Sizes (ours: 2+2 layers, 64-128 wide for 2 CPU cores; the paper used 3 layers, 512 wide).
    vocab_size:
        Token vocabulary (``tokens.VOCAB_SIZE``).
    """

    def __init__(
        self,
        d_model: int = 64,
        heads: int = 4,
        encoder_layers: int = 2,
        decoder_layers: int = 2,
        ff: int = 128,
        vocab_size: int = tok.VOCAB_SIZE,
    ) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.embed = nn.Embedding(vocab_size, d_model)
        self.position = nn.Embedding(MAX_POSITIONS, d_model)
        self.example_embed = nn.Embedding(8, d_model)
        self.transformer = nn.Transformer(
            d_model,
            heads,
            dropout=0.0,
            batch_first=True,
            norm_first=True,
            custom_encoder=_encoder(d_model, heads, encoder_layers, ff),
            num_decoder_layers=decoder_layers,
            dim_feedforward=ff,
        )
        self.head = nn.Linear(d_model, vocab_size)

    drop_fraction = 1 / 3  # generate drops finished contexts once they are this share of its batch

    def encode(self, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``context [N, E, T]`` -> memory ``[N, E*T, d]`` and its padding mask ``[N, E*T]``."""
        _check_tokens("context", context, self.vocab_size)
        n, e, t = context.shape
        if e > self.example_embed.num_embeddings:
            raise ValueError(f"at most {self.example_embed.num_embeddings} examples, got {e}")
        flat = context.reshape(n * e, t)
        pad = flat == tok.PAD
        target_width = 1 + tok.TARGET_TOKENS
        pos = layout_positions(t - target_width, target_width, flat.device)
        x = self.embed(flat) + self.position(pos)
        memory = self.transformer.encoder(x, src_key_padding_mask=pad).reshape(n, e, t, -1)
        memory = memory + self.example_embed(torch.arange(e, device=flat.device))[None, :, None]
        return memory.reshape(n, e * t, -1), pad.reshape(n, e * t)

    def decode(self, memory: torch.Tensor, memory_pad: torch.Tensor, prefix: torch.Tensor) -> torch.Tensor:
        """Logits ``[N, L, vocab]`` for each position of ``prefix [N, L]`` (which starts with BOS)."""
        length = prefix.shape[1]
        x = self.embed(prefix) + self.position(torch.arange(length, device=prefix.device))
        causal = nn.Transformer.generate_square_subsequent_mask(length, device=prefix.device)
        out = self.transformer.decoder(
            x, memory, tgt_mask=causal, tgt_is_causal=True, memory_key_padding_mask=memory_pad
        )
        return self.head(out)

    def teacher_forced_logits(
        self,
        context: torch.Tensor,
        target: torch.Tensor,
        encoded: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Logits ``[N, L, vocab]`` predicting ``target [N, L]`` (EOS-terminated, PAD after); ``encoded``
        reuses ``encode(context)`` computed once for several targets."""
        memory, pad = self.encode(context) if encoded is None else encoded
        bos = torch.full_like(target[:, :1], tok.BOS)
        return self.decode(memory, pad, torch.cat([bos, target[:, :-1]], 1))

    @staticmethod
    def _cross_attend(
        query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, bias: torch.Tensor
    ) -> torch.Tensor:
        """Attention of one projected, scaled query per row, ``query [N*G, H, d/H]``, where the ``G``
        consecutive rows ``n*G .. n*G+G-1`` share memory row ``n``: cached keys ``[N, H, d/H, M]``
        (transposed), values ``[N, H, M, d/H]``, ``bias [N, 1, 1, M]`` (0 or ``-inf`` for padding). The ``G``
        queries of a memory row go through one matrix product (sample and greedy rollouts, or a beam,
        share the memory): for single queries, plain batched products beat the fused CPU attention kernel
        several times. Returns the heads' outputs ``[N*G, H*d/H]`` (before the output projection)."""
        rows, heads, dh = query.shape
        n, _, _, m = key.shape
        g = rows // n
        q = query.view(n, g, heads, dh).transpose(1, 2).reshape(n * heads, g, dh)
        scores = torch.bmm(q, key.view(n * heads, dh, m)).view(n, heads, g, m) + bias
        probs = torch.softmax(scores, -1).view(n * heads, g, m)
        out = torch.bmm(probs, value.view(n * heads, m, dh)).view(n, heads, g, dh)
        return out.transpose(1, 2).reshape(rows, -1)

    @staticmethod
    def _self_attend(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """Causal self-attention of the newest position, ``query [N, H, d/H]`` (projected and scaled),
        over the cached keys ``[N, H, d/H, L]`` (transposed) and values ``[N, H, L, d/H]`` (L <= the
        subgoal length): broadcast products, which beat thousands of tiny batched matrix products here.
        Returns the heads' outputs ``[N, H*d/H]``."""
        scores = (query.unsqueeze(-1) * key).sum(2)  # [N, H, L]
        probs = torch.softmax(scores, -1)
        return (probs.unsqueeze(-1) * value).sum(2).flatten(1)

    @staticmethod
    def _project(attn: nn.MultiheadAttention, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Transposed keys ``[N, H, d/H, M]`` and values ``[N, H, M, d/H]`` of ``x [N, M, d]`` under
        ``attn``'s input projection, contiguous so that every step's products read them without a copy."""
        n, m, d = x.shape
        kv = nn.functional.linear(x, attn.in_proj_weight[d:], attn.in_proj_bias[d:])
        k, v = kv.reshape(n, m, 2, attn.num_heads, d // attn.num_heads).unbind(2)
        return k.permute(0, 2, 3, 1).contiguous(), v.transpose(1, 2).contiguous()

    @staticmethod
    def compact_memory(memory: torch.Tensor, memory_pad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The memory's live positions packed to the front (:func:`pack_live`). Exact for attention over
        keys: their order does not matter (positions were added before the encoder) and padded keys get
        weight ``exp(-inf) = 0``; only the float summation order changes."""
        order, packed_pad = pack_live(memory_pad)
        return memory.gather(1, order[..., None].expand(-1, -1, memory.shape[2])), packed_pad

    def start_cache(self, memory: torch.Tensor, memory_pad: torch.Tensor, group: int = 1) -> dict:
        """A key/value cache for :meth:`decode_step`: every decoder layer's cross-attention keys and
        values of ``memory`` (computed once, on the compacted memory, see :meth:`compact_memory`), empty
        self-attention histories and the query projections with ``1/sqrt(d/H)`` folded in. ``group`` rows
        decode per memory row: rows ``n*group .. n*group+group-1`` read memory row ``n`` (a beam, or a
        sample and a greedy rollout) without repeating it."""
        if group < 1:
            raise ValueError(f"group must be >= 1, got {group}")
        memory, memory_pad = self.compact_memory(memory, memory_pad)
        layers = self.transformer.decoder.layers
        d = self.d_model
        scale = torch.ones(3 * d, device=memory.device)
        scale[:d] = 1.0 / math.sqrt(d // layers[0].self_attn.num_heads)
        return {
            "cross": [self._project(layer.multihead_attn, memory) for layer in layers],
            "mask": torch.zeros(memory_pad.shape, device=memory.device).masked_fill(
                memory_pad, float("-inf")
            )[:, None, None, :],
            "weights": [
                (
                    layer.self_attn.in_proj_weight * scale[:, None],
                    layer.self_attn.in_proj_bias * scale,
                    layer.multihead_attn.in_proj_weight[:d] * scale[:d, None],
                    layer.multihead_attn.in_proj_bias[:d] * scale[:d],
                )
                for layer in layers
            ],
            "self": [None] * len(layers),
            "length": 0,
            "group": group,
        }

    @staticmethod
    def reorder_cache(cache: dict, rows: torch.Tensor) -> dict:
        """The cache of rows ``rows`` (beam search keeps its surviving hypotheses, generation drops
        finished contexts). Blocks of ``group`` rows that read one memory row keep a shared
        cross-attention cache (selected, or untouched if unchanged); any other reordering expands it.
        A selected cache keeps only as many memory columns as its longest row has live positions (they
        are packed to the front, :meth:`compact_memory`)."""
        g = cache["group"]
        selfs = [None if kv is None else (kv[0][rows], kv[1][rows]) for kv in cache["self"]]
        memory_rows = torch.div(rows, g, rounding_mode="floor")
        blocks = memory_rows.view(-1, g) if len(rows) % g == 0 else None
        if blocks is not None and bool((blocks == blocks[:, :1]).all()):
            keep = blocks[:, 0]
            if torch.equal(keep, torch.arange(cache["mask"].shape[0], device=keep.device)):
                return {**cache, "self": selfs}
        else:
            keep, g = memory_rows, 1
        mask = cache["mask"][keep]
        width = max(int((mask == 0).sum(-1).max()), 1)
        return {
            **cache,
            "cross": [
                (k[..., :width][keep].contiguous(), v[:, :, :width][keep].contiguous())
                for k, v in cache["cross"]
            ],
            "mask": mask[..., :width],
            "self": selfs,
            "group": g,
        }

    def decode_step(self, token: torch.Tensor, cache: dict) -> torch.Tensor:
        """Logits ``[N, vocab]`` of the token after ``token [N]``, extending ``cache`` in place.

        Equal (to float rounding) to the last position of :meth:`decode` over the whole prefix, but each
        step costs one position instead of the prefix length: the norm-first decoder layers are unrolled
        with the self-attention keys/values of earlier positions and the memory's cross-attention
        keys/values kept (``nn.TransformerDecoder`` has no such cache). Self-attention histories live in
        buffers that grow in chunks, so a step writes one column instead of copying the history.
        """
        t = cache["length"]
        x = self.embed(token) + self.position.weight[t]  # [N, d]
        for i, layer in enumerate(self.transformer.decoder.layers):
            w_qkv, b_qkv, w_q, b_q = cache["weights"][i]
            heads = layer.self_attn.num_heads
            qkv = nn.functional.linear(layer.norm1(x), w_qkv, b_qkv).view(len(x), 3, heads, -1)
            q, k, v = qkv.unbind(1)  # [N, H, d/H] each (q scaled), one projection
            buf = cache["self"][i]
            if buf is None or buf[0].shape[3] <= t:
                kb = k.new_zeros((*k.shape, t + 32))
                vb = v.new_zeros((v.shape[0], v.shape[1], t + 32, v.shape[2]))
                if buf is not None:
                    kb[..., :t] = buf[0][..., :t]
                    vb[:, :, :t] = buf[1][:, :, :t]
                buf = cache["self"][i] = (kb, vb)
            buf[0][..., t] = k
            buf[1][:, :, t] = v
            x = x + layer.self_attn.out_proj(
                self._self_attend(q, buf[0][..., : t + 1], buf[1][:, :, : t + 1])
            )
            q = nn.functional.linear(layer.norm2(x), w_q, b_q).view(len(x), heads, -1)
            x = x + layer.multihead_attn.out_proj(self._cross_attend(q, *cache["cross"][i], cache["mask"]))
            x = x + layer.linear2(layer.activation(layer.linear1(layer.norm3(x))))
        cache["length"] += 1
        norm = self.transformer.decoder.norm
        return self.head(norm(x) if norm is not None else x)

    @staticmethod
    def race_noise(
        shape: tuple[int, ...], generator: torch.Generator | None = None, device: torch.device | None = None
    ) -> torch.Tensor:
        """Standard Gumbel noise ``-log(-log U)``: ``argmax(logits + noise)`` over the last axis draws a
        token from ``softmax(logits)`` (the Gumbel-max trick, exact up to the float32 resolution of ``U``
        as inverse-CDF sampling is), so a whole rollout's randomness is drawn in one call."""
        u = torch.rand(shape, generator=generator, device=device).clamp_(min=torch.finfo(torch.float32).tiny)
        return u.log_().neg_().log_().neg_()

    def generate(
        self,
        context: torch.Tensor,
        greedy: bool | torch.Tensor,
        generator: torch.Generator | None = None,
        max_len: int = MAX_SUBGOAL_TOKENS,
        temperature: float = 1.0,
        repeat: int = 1,
        encoded: tuple[torch.Tensor, torch.Tensor] | None = None,
        drop_finished: bool = True,
    ) -> torch.Tensor:
        """Decode ``[repeat * N, max_len]`` subgoal tokens (PAD after EOS), greedily or by sampling, with
        a key/value cache; ``greedy`` may be a ``[repeat * N]`` bool tensor choosing per row. ``repeat``
        decodes each context several times (row ``r * N + i`` reads context ``i``) from one encoder
        pass and one cross-attention cache; ``encoded`` reuses ``encode(context)`` (detached here).
        Sampled rows take ``argmax(logits / temperature + race_noise)``; contexts whose rows have all
        ended are dropped from the batch (their cache rows too) once they are a third of it
        (``drop_finished=False`` keeps them: the same tokens, the reference). Runs in inference mode
        (cheaper per op than ``no_grad``); the returned tokens are ordinary tensors."""
        with torch.inference_mode():
            memory, pad = self.encode(context) if encoded is None else (encoded[0].detach(), encoded[1])
            n = memory.shape[0]
            rows = n * repeat
            # internally row i * repeat + r (the rows of one context are adjacent and share its memory)
            to_internal = torch.arange(rows, device=context.device).view(repeat, n).T.reshape(-1)
            greedy_rows = torch.as_tensor(greedy, dtype=torch.bool, device=context.device).expand(rows)[
                to_internal
            ]
            sampled = ~greedy_rows
            noise = None  # [max_len, rows, vocab]: Gumbel noise on sampled rows, 0 on greedy ones
            if bool(sampled.any()):
                noise = torch.zeros(max_len, rows, self.vocab_size, device=context.device)
                shape = (max_len, int(sampled.sum()), self.vocab_size)
                noise[:, sampled] = self.race_noise(shape, generator, context.device)
            scale = None if temperature == 1.0 else torch.where(sampled, 1.0 / temperature, 1.0)[:, None]
            cache = self.start_cache(memory, pad, group=repeat)
            nxt = torch.full((rows,), tok.BOS, dtype=torch.long, device=context.device)
            done = torch.zeros(rows, dtype=torch.bool, device=context.device)
            tokens = torch.full((rows, max_len), tok.PAD, dtype=torch.long, device=context.device)
            live = None  # internal rows still in the batch (None: all)
            first = 0  # the step that noise[0] is for
            for step in range(max_len):
                logits = self.decode_step(nxt, cache)
                logits = logits if scale is None else logits * scale
                nxt = (
                    (logits if noise is None else logits + noise[step - first])
                    .argmax(-1)
                    .masked_fill_(done, tok.PAD)
                )
                if live is None:
                    tokens[:, step] = nxt
                else:
                    tokens[live, step] = nxt
                done = done | (nxt == tok.EOS)
                ended = done.view(-1, repeat).all(1)
                count = int(ended.sum())
                if count == len(ended):
                    break
                if drop_finished and count >= self.drop_fraction * len(ended):
                    keep = (
                        torch.nonzero(~ended)[:, :1] * repeat + torch.arange(repeat, device=nxt.device)
                    ).reshape(-1)
                    cache = self.reorder_cache(cache, keep)
                    nxt, done = nxt[keep], done[keep]
                    noise = None if noise is None else noise[step + 1 - first :, keep]  # the steps to come
                    first = step + 1
                    scale = None if scale is None else scale[keep]
                    live = keep if live is None else live[keep]
        return tokens.view(n, repeat, max_len).transpose(0, 1).reshape(rows, max_len).clone()

    def sequence_stats(
        self,
        context: torch.Tensor,
        tokens: torch.Tensor,
        encoded: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """For decoded ``tokens [N, L]``: the summed log-probability ``[N]`` and the mean per-step entropy
        ``[N]`` of the policy over the generated positions (up to and including EOS), with gradients.
        Trailing all-PAD columns are dropped first (they carry no terms; causal attention means the
        earlier positions do not see them)."""
        live_columns = torch.nonzero((tokens != tok.PAD).any(0))
        tokens = tokens[:, : int(live_columns.max()) + 1 if len(live_columns) else 1]
        logits = self.teacher_forced_logits(context, tokens, encoded)
        logp = torch.log_softmax(logits, -1)
        live = (tokens != tok.PAD).float()
        token_logp = logp.gather(2, tokens[..., None]).squeeze(2) * live
        entropy = -(logp.exp() * logp).sum(-1) * live
        steps = live.sum(1).clamp(min=1)
        return token_logp.sum(1), entropy.sum(1) / steps

    @torch.no_grad()
    def beam_search(
        self, context: torch.Tensor, beam_size: int, max_len: int = MAX_SUBGOAL_TOKENS
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Top ``beam_size`` subgoal sequences ``[N, K, max_len]`` and their log-probabilities ``[N, K]``."""
        if beam_size < 1:
            raise ValueError(f"beam_size must be >= 1, got {beam_size}")
        memory, pad = self.encode(context)
        n = context.shape[0]
        k = beam_size
        cache = self.start_cache(memory, pad, group=k)  # the k hypotheses of a context share its memory
        prefix = torch.full((n * k, 1), tok.BOS, dtype=torch.long, device=context.device)
        scores = torch.full((n, k), float("-inf"), device=context.device)
        scores[:, 0] = 0.0
        done = torch.zeros(n * k, dtype=torch.bool, device=context.device)
        for _ in range(max_len):
            logp = torch.log_softmax(self.decode_step(prefix[:, -1], cache), -1)  # [N*K, vocab]
            vocab = logp.shape[1]
            frozen = torch.full_like(logp, float("-inf"))
            frozen[:, tok.PAD] = 0.0
            logp = torch.where(done[:, None], frozen, logp)
            total = (scores.reshape(-1, 1) + logp).reshape(n, k * vocab)
            top, index = total.topk(k, dim=1)
            parent = index // vocab
            token = index % vocab
            base = (torch.arange(n, device=context.device)[:, None] * k + parent).reshape(-1)
            prefix = torch.cat([prefix[base], token.reshape(-1, 1)], 1)
            cache = self.reorder_cache(cache, base)
            done = done[base] | (token.reshape(-1) == tok.EOS) | (token.reshape(-1) == tok.PAD)
            scores = top
            if bool(done.all()):
                break
        tokens = prefix[:, 1:]
        if tokens.shape[1] < max_len:
            tokens = torch.cat([tokens, tokens.new_full((n * k, max_len - tokens.shape[1]), tok.PAD)], 1)
        return tokens.reshape(n, k, max_len), scores
