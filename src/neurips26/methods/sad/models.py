"""The two learned parts of decomposition-based PBE: a decomposer (seq2seq) and a scoring synthesizer.

* :class:`Decomposer` — a small ``torch.nn.Transformer``. Its encoder reads each example's program state
  and output (see :mod:`.tokens`); its decoder attends to all examples' encodings at once and generates
  the next subgoal, the next step's value on every example, token by token. It can therefore propose
  subgoals that are malformed, or well-formed but hard for the synthesizer: the phenomenon SAD targets.
* :class:`Synthesizer` — reads each example's state plus a target (a subgoal, or the task output for the
  no-decomposition baseline) and scores **every** candidate statement of :mod:`.executor` in one pass:
  ``logit(op, lambda, a, b) = s_f(h) + q_{f,0}(h)·v_a + q_{f,1}(h)·v_b`` with ``h`` the pooled target
  encoding and ``v_a`` the pooled encoding of variable ``a`` plus its embedded relation features
  (:mod:`.relations`); type-incorrect candidates are masked. Its
  log-softmax gives the exact cross-entropy of the GT statement (SAD's reward) and a beam for free.

Both satisfy :class:`SolverScorer` / the decomposer API used by :mod:`.training` and :mod:`.search`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn

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


MAX_SUBGOAL_TOKENS = 3 * tok.VALUE_TOKENS + 3  # three list values, two separators, EOS


@dataclass
class SynthContext:
    """What a synthesizer sees besides its target: ``state [N, E, S]`` tokens, ``var_pos [N, E, V]``
    (token index of each variable, -1 absent) and ``kinds [N, V]`` (0 absent, 1 int, 2 list)."""

    state: torch.Tensor
    var_pos: torch.Tensor
    kinds: torch.Tensor

    def __len__(self) -> int:
        return self.state.shape[0]

    def index(self, rows: torch.Tensor) -> SynthContext:
        return SynthContext(self.state[rows], self.var_pos[rows], self.kinds[rows])


class SolverScorer(Protocol):
    """Any frozen solver that can drive SAD training: the log-likelihood of a statement given a context
    and a (possibly malformed) subgoal token sequence."""

    def score(self, context: SynthContext, subgoal: torch.Tensor, statement: torch.Tensor) -> torch.Tensor:
        """``[N]`` log p(statement | context, subgoal); ``subgoal`` is ``[N, T]`` decomposer tokens."""
        ...


def _encoder(d_model: int, heads: int, layers: int, ff: int) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(d_model, heads, ff, dropout=0.0, batch_first=True, norm_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


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

    Parameters
    ----------
    d_model, heads, layers, ff:
        Transformer encoder size (ours: 64-128 wide, 2 layers fit 2 CPU cores).
    vocab_size:
        Token vocabulary (``tokens.VOCAB_SIZE``); a checkpoint with another vocabulary fails loudly.
    relations:
        Add :func:`relation_features` (embedded, averaged over examples) to each variable's encoding
        (ours: the calibration lever, see README).
    """

    def __init__(
        self,
        d_model: int = 64,
        heads: int = 4,
        layers: int = 2,
        ff: int = 128,
        vocab_size: int = tok.VOCAB_SIZE,
        space: CandidateSpace = CANDIDATES,
        relations: bool = True,
    ) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.embed = nn.Embedding(vocab_size, d_model)
        self.position = nn.Embedding(MAX_POSITIONS, d_model)
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
        self.d_model = d_model

    def type_mask(self, kinds: torch.Tensor) -> torch.Tensor:
        """``[N, C]`` bool: the candidate's arguments exist with the right kinds."""
        ok0 = kinds[:, self.cand_arg0] == self.cand_kind0
        ok1 = torch.where(self.cand_arg1 >= 0, kinds[:, self.cand_arg1.clamp(min=0)] == self.cand_kind1, True)
        return ok0 & ok1

    def components(
        self, context: SynthContext, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The parts of every candidate's logit: ``func [N, F]``, ``args [N, F, 2, V]`` and the type mask
        ``[N, C]``. ``target`` is ``[N, E, 1 + TARGET_TOKENS]`` (``OUT`` then the target's tokens)."""
        _check_tokens("state", context.state, self.vocab_size)
        _check_tokens("target", target, self.vocab_size)
        n, e, s = context.state.shape
        seq = torch.cat([context.state, target], dim=2).reshape(n * e, -1)
        if s > tok.state_width(10):
            raise ValueError(f"state of {s} tokens exceeds {tok.state_width(10)} (ten variables)")
        pad = seq == tok.PAD
        pos = layout_positions(s, target.shape[2], seq.device)
        hidden = self.encoder(self.embed(seq) + self.position(pos), src_key_padding_mask=pad)
        hidden = hidden.reshape(n, e, -1, self.d_model)
        target_h = hidden[:, :, s]  # the OUT token
        live = (~pad).reshape(n, e, -1, 1).float()
        mean_h = (hidden * live).sum(2) / live.sum(2).clamp(min=1)
        h = self.pool(torch.cat([target_h, mean_h], -1)).mean(1)  # [N, d]
        var_index = context.var_pos.clamp(min=0)
        var_h = torch.gather(hidden, 2, var_index[..., None].expand(-1, -1, -1, self.d_model)).mean(
            1
        )  # [N, V, d]
        if self.relations is not None:
            rel = self.relations(relation_features(context.state, target)).mean(1)  # [N, V', d]
            var_h = var_h + nn.functional.pad(rel, (0, 0, 0, var_h.shape[1] - rel.shape[1]))
        fe = self.function_embed.weight  # [F, d]
        func = self.function_score(torch.nn.functional.gelu(h[:, None] + fe[None])).squeeze(-1)  # [N, F]
        hf = torch.nn.functional.gelu(self.arg_hidden(h)[:, None] + fe[None])  # [N, F, d]
        q = self.arg_query(hf).reshape(n, -1, 2, self.d_model)
        args = torch.einsum("nfjd,nvd->nfjv", q, var_h) / math.sqrt(self.d_model)
        return func, args, self.type_mask(context.kinds)

    def log_probs(self, context: SynthContext, target: torch.Tensor) -> torch.Tensor:
        """``[N, C]`` log p(candidate | state, target) over all candidates; masked ones are ``-inf``."""
        func, args, mask = self.components(context, target)
        n = func.shape[0]
        rows = torch.arange(n, device=func.device)[:, None]
        logits = func[:, self.cand_function]
        logits = logits + args[rows, self.cand_function, 0, self.cand_arg0]
        second = args[rows, self.cand_function, 1, self.cand_arg1.clamp(min=0)]
        logits = logits + torch.where(self.cand_arg1 >= 0, second, torch.zeros_like(second))
        logits = logits.masked_fill(~mask, float("-inf"))
        return torch.log_softmax(logits, dim=-1)

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
    def _attend(
        attn: nn.MultiheadAttention,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``attn`` for one query position ``[N, 1, d]`` over the cached keys ``[N, H, d/H, M]`` (transposed)
        and values ``[N, H, M, d/H]``; ``bias [N, 1, 1, M]`` is 0 or ``-inf`` (padding). Plain
        matrix products: for a single query they beat the fused CPU attention kernel several times."""
        n, length, d = query.shape
        heads = attn.num_heads
        q = nn.functional.linear(query, attn.in_proj_weight[:d], attn.in_proj_bias[:d])
        q = q.reshape(n * heads, 1, d // heads) / math.sqrt(d // heads)  # one query position
        scores = torch.bmm(q, key.view(n * heads, d // heads, -1)).view(n, heads, 1, -1)
        if bias is not None:
            scores = scores + bias
        probs = torch.softmax(scores, -1).view(n * heads, 1, -1)
        out = torch.bmm(probs, value.view(n * heads, -1, d // heads))  # [N*H, 1, d/H]
        return attn.out_proj(out.view(n, length, d))

    @staticmethod
    def _project(attn: nn.MultiheadAttention, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Transposed keys ``[N, H, d/H, M]`` and values ``[N, H, M, d/H]`` of ``x [N, M, d]`` under
        ``attn``'s input projection, contiguous so that every step's products read them without a copy."""
        n, m, d = x.shape
        kv = nn.functional.linear(x, attn.in_proj_weight[d:], attn.in_proj_bias[d:])
        k, v = kv.reshape(n, m, 2, attn.num_heads, d // attn.num_heads).unbind(2)
        return k.permute(0, 2, 3, 1).contiguous(), v.transpose(1, 2).contiguous()

    def start_cache(self, memory: torch.Tensor, memory_pad: torch.Tensor) -> dict:
        """A key/value cache for :meth:`decode_step`: every decoder layer's cross-attention keys and
        values of ``memory`` (computed once) and empty self-attention histories."""
        layers = self.transformer.decoder.layers
        return {
            "cross": [self._project(layer.multihead_attn, memory) for layer in layers],
            "mask": torch.zeros(memory_pad.shape, device=memory.device).masked_fill(
                memory_pad, float("-inf")
            )[:, None, None, :],
            "self": [None] * len(layers),
            "length": 0,
        }

    @staticmethod
    def reorder_cache(cache: dict, rows: torch.Tensor) -> dict:
        """The cache of rows ``rows`` (beam search keeps its surviving hypotheses)."""
        pick = lambda kv: tuple(t[rows] for t in kv)  # noqa: E731
        return {
            "cross": [pick(kv) for kv in cache["cross"]],
            "mask": cache["mask"][rows],
            "self": [None if kv is None else pick(kv) for kv in cache["self"]],
            "length": cache["length"],
        }

    def decode_step(self, token: torch.Tensor, cache: dict) -> torch.Tensor:
        """Logits ``[N, vocab]`` of the token after ``token [N]``, extending ``cache`` in place.

        Equal (to float rounding) to the last position of :meth:`decode` over the whole prefix, but each
        step costs one position instead of the prefix length: the norm-first decoder layers are unrolled
        with the self-attention keys/values of earlier positions and the memory's cross-attention
        keys/values kept (``nn.TransformerDecoder`` has no such cache).
        """
        position = torch.full_like(token, cache["length"])
        x = (self.embed(token) + self.position(position))[:, None]  # [N, 1, d]
        for i, layer in enumerate(self.transformer.decoder.layers):
            h = layer.norm1(x)
            k, v = self._project(layer.self_attn, h)
            if cache["self"][i] is not None:
                k = torch.cat([cache["self"][i][0], k], 3)
                v = torch.cat([cache["self"][i][1], v], 2)
            cache["self"][i] = (k, v)
            x = x + self._attend(layer.self_attn, h, k, v)
            x = x + self._attend(layer.multihead_attn, layer.norm2(x), *cache["cross"][i], cache["mask"])
            x = x + layer.linear2(layer.activation(layer.linear1(layer.norm3(x))))
        cache["length"] += 1
        norm = self.transformer.decoder.norm
        return self.head(norm(x) if norm is not None else x)[:, 0]

    @torch.no_grad()
    def generate(
        self,
        context: torch.Tensor,
        greedy: bool | torch.Tensor,
        generator: torch.Generator | None = None,
        max_len: int = MAX_SUBGOAL_TOKENS,
        temperature: float = 1.0,
        repeat: int = 1,
        encoded: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Decode ``[repeat * N, max_len]`` subgoal tokens (PAD after EOS), greedily or by sampling, with
        a key/value cache; ``greedy`` may be a ``[repeat * N]`` bool tensor choosing per row. ``repeat``
        decodes each context several times (row ``r * N + i`` reads context ``i``) from one encoder
        pass; ``encoded`` reuses ``encode(context)`` (detached here)."""
        memory, pad = self.encode(context) if encoded is None else (encoded[0].detach(), encoded[1])
        if repeat > 1:
            memory, pad = memory.repeat(repeat, 1, 1), pad.repeat(repeat, 1)
        n = memory.shape[0]
        greedy_rows = torch.as_tensor(greedy, dtype=torch.bool).expand(n)
        cache = self.start_cache(memory, pad)
        nxt = torch.full((n,), tok.BOS, dtype=torch.long, device=context.device)
        done = torch.zeros(n, dtype=torch.bool, device=context.device)
        out = []
        for _ in range(max_len):
            logits = self.decode_step(nxt, cache)
            nxt = logits.argmax(-1)
            if not bool(greedy_rows.all()):
                probs = torch.softmax(logits / temperature, -1)
                sampled = torch.multinomial(probs, 1, generator=generator).squeeze(1)
                nxt = torch.where(greedy_rows, nxt, sampled)
            nxt = torch.where(done, torch.full_like(nxt, tok.PAD), nxt)
            out.append(nxt)
            done = done | (nxt == tok.EOS)
            if bool(done.all()):
                break
        tokens = torch.stack(out, 1)
        if tokens.shape[1] < max_len:
            tokens = torch.cat([tokens, tokens.new_full((n, max_len - tokens.shape[1]), tok.PAD)], 1)
        return tokens

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
        cache = self.start_cache(memory.repeat_interleave(k, 0), pad.repeat_interleave(k, 0))
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
