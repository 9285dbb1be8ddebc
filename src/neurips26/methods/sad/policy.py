"""SAD's decoder terms with gradients in one pass: ``L_sup`` on the GT subgoal and the policy terms
(``log pi(sample)``, mean per-step entropy) of the sampled subgoal.

The reference computes them with two teacher-forced :meth:`Decomposer.decode` calls over the padded
memory (:func:`.training.supervised_loss`, :meth:`Decomposer.sequence_stats`). Most of those two calls'
time (forward and backward) is the cross-attention key/value projection of the memory, computed twice,
over ``E * T`` positions of which ~70 % are padding. :func:`sup_and_policy_terms` runs both targets of a
context as one group of queries against **one** key/value projection of the **compacted** memory
(:meth:`Decomposer.compact_memory`, the rollouts' cache does the same): the same functions, equal to float
rounding (trailing PAD columns carry no terms and causal attention hides them from earlier positions;
padded memory keys get weight 0 either way; the key order does not matter).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from neurips26.methods.sad import tokens as tok
from neurips26.methods.sad.models import Decomposer


def grouped_teacher_forced_logits(
    decomposer: Decomposer, memory: torch.Tensor, memory_pad: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    """Logits ``[N, G, L, vocab]`` predicting each of the ``G`` targets ``targets [N, G, L]`` of memory
    row ``n`` (EOS-terminated, PAD after), i.e. ``teacher_forced_logits`` of every target, with the
    memory's cross-attention keys/values projected once per layer for all ``G`` targets."""
    n, g, length = targets.shape
    d = decomposer.d_model
    memory, memory_pad = decomposer.compact_memory(memory, memory_pad)
    keep = ~memory_pad[:, None, None, :]  # [N, 1, 1, M]: True = attend
    prefix = torch.cat([torch.full_like(targets[..., :1], tok.BOS), targets[..., :-1]], 2)
    x = decomposer.embed(prefix.reshape(n * g, length)) + decomposer.position(
        torch.arange(length, device=targets.device)
    )
    for layer in decomposer.transformer.decoder.layers:
        attn = layer.self_attn
        heads = attn.num_heads
        dh = d // heads
        qkv = F.linear(layer.norm1(x), attn.in_proj_weight, attn.in_proj_bias)
        q, k, v = qkv.view(n * g, length, 3, heads, dh).permute(2, 0, 3, 1, 4).unbind(0)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [N*G, H, L, dh]
        x = x + attn.out_proj(out.transpose(1, 2).reshape(n * g, length, d))
        cross = layer.multihead_attn
        q = F.linear(layer.norm2(x), cross.in_proj_weight[:d], cross.in_proj_bias[:d])
        q = q.view(n, g * length, heads, dh).transpose(1, 2)  # the G targets of a row share its memory
        kv = F.linear(memory, cross.in_proj_weight[d:], cross.in_proj_bias[d:])
        k, v = kv.view(n, -1, 2, heads, dh).permute(2, 0, 3, 1, 4).unbind(0)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)  # [N, H, G*L, dh]
        x = x + cross.out_proj(out.transpose(1, 2).reshape(n * g, length, d))
        x = x + layer.linear2(layer.activation(layer.linear1(layer.norm3(x))))
    norm = decomposer.transformer.decoder.norm
    return decomposer.head(norm(x) if norm is not None else x).view(n, g, length, -1)


def sup_and_policy_terms(
    decomposer: Decomposer,
    encoded: tuple[torch.Tensor, torch.Tensor],
    target: torch.Tensor,
    sample: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(L_sup, log pi(sample) [N], entropy [N])`` with gradients, from one grouped decoder pass.

    ``L_sup`` is :func:`.training.supervised_loss` of the GT subgoal ``target [N, L]`` (token mean, EOS
    included, PAD ignored); the other two are :meth:`Decomposer.sequence_stats` of ``sample [N, L']``
    (summed log-probability and mean entropy over the generated steps, EOS included, PAD excluded)."""
    if target.shape[0] != sample.shape[0]:
        raise ValueError(f"target and sample need the same rows, got {target.shape[0]} and {sample.shape[0]}")
    memory, memory_pad = encoded
    width = max(target.shape[1], sample.shape[1])
    both = torch.stack(
        [nn.functional.pad(t, (0, width - t.shape[1]), value=tok.PAD) for t in (target, sample)], 1
    )
    live_columns = torch.nonzero((both != tok.PAD).flatten(0, 1).any(0))
    both = both[..., : int(live_columns.max()) + 1 if len(live_columns) else 1]  # trailing PAD: no terms
    logits = grouped_teacher_forced_logits(decomposer, memory, memory_pad, both)
    sup = F.cross_entropy(logits[:, 0].transpose(1, 2), both[:, 0], ignore_index=tok.PAD)
    logp = torch.log_softmax(logits[:, 1], -1)
    tokens = both[:, 1]
    live = (tokens != tok.PAD).float()
    token_logp = logp.gather(2, tokens[..., None]).squeeze(2) * live
    entropy = -(logp.exp() * logp).sum(-1) * live
    return sup, token_logp.sum(1), entropy.sum(1) / live.sum(1).clamp(min=1)
