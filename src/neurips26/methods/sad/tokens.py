"""Token vocabulary shared by the decomposer and the synthesizer, and the tensor layouts they read.

Vocabulary: ``PAD BOS EOS | [ ] OUT x0..x9 -50..50`` (118 tokens). Per example, a model reads::

    x0 [ 1 2 ] <pad> <pad> <pad> x1 3 <pad> ... OUT <target value tokens, pad to 8>

Every variable fills a fixed slot of 8 tokens, so element ``k`` of any variable sits at a fixed offset from
element ``k`` of the target: elementwise relations (``Map``, ``ZipWith``) are a fixed positional pattern.

where the target is the task's output (decomposer, no-decomposition synthesizer) or the subgoal's value
on that example (synthesizer). A subgoal is generated as one sequence over all examples::

    <value e0> | <value e1> | <value e2> EOS
"""

from __future__ import annotations

import numpy as np
import torch

from neurips26.methods.sad import dsl

PAD, BOS, EOS, SEP, LBR, RBR, OUT = range(7)
VAR0 = 7
INT0 = VAR0 + dsl.MAX_VARIABLES
VOCAB_SIZE = INT0 + (dsl.MAX_INT - dsl.MIN_INT + 1)
VALUE_TOKENS = dsl.MAX_LIST_LENGTH + 2  # '[' five ints ']'
TARGET_TOKENS = 8  # one value plus room for a stray token
SPECIALS = ("<pad>", "<bos>", "<eos>", "|", "[", "]", "OUT")


def token_text(token: int) -> str:
    """The text of one token id (for messages and debugging)."""
    if not 0 <= token < VOCAB_SIZE:
        raise ValueError(f"token id must be in [0, {VOCAB_SIZE}), got {token}")
    if token < VAR0:
        return SPECIALS[token]
    if token < INT0:
        return f"x{token - VAR0}"
    return str(token - INT0 + dsl.MIN_INT)


def value_tokens(value: dsl.Value) -> list[int]:
    """``3 -> [int(3)]``, ``(1, 2) -> ['[', 1, 2, ']']``."""
    if dsl.value_type(value) == dsl.INT:
        return [INT0 + value - dsl.MIN_INT]
    return [LBR] + [INT0 + v - dsl.MIN_INT for v in value] + [RBR]


def subgoal_tokens(subgoal: tuple[dsl.Value, ...]) -> list[int]:
    """The decomposer's target sequence for a subgoal (values joined by ``|``, then EOS)."""
    out: list[int] = []
    for e, value in enumerate(subgoal):
        if e:
            out.append(SEP)
        out.extend(value_tokens(value))
    return [*out, EOS]


def parse_subgoal(tokens: list[int] | np.ndarray, num_examples: int) -> tuple[dsl.Value, ...] | None:
    """Decode a generated subgoal; ``None`` unless it is ``num_examples`` well-formed in-range values of
    one type."""
    seq = [int(t) for t in tokens]
    if EOS in seq:
        seq = seq[: seq.index(EOS)]
    chunks: list[list[int]] = [[]]
    for t in seq:
        if t == SEP:
            chunks.append([])
        else:
            chunks[-1].append(t)
    if len(chunks) != num_examples:
        return None
    values: list[dsl.Value] = []
    for chunk in chunks:
        if len(chunk) == 1 and chunk[0] >= INT0:
            values.append(chunk[0] - INT0 + dsl.MIN_INT)
        elif (
            len(chunk) >= 2
            and chunk[0] == LBR
            and chunk[-1] == RBR
            and len(chunk) - 2 <= dsl.MAX_LIST_LENGTH
            and all(t >= INT0 for t in chunk[1:-1])
        ):
            values.append(tuple(t - INT0 + dsl.MIN_INT for t in chunk[1:-1]))
        else:
            return None
    if len({dsl.value_type(v) for v in values}) != 1:
        return None
    return tuple(values)


def state_tokens(state: list[list[dsl.Value]], width: int) -> np.ndarray:
    """Tokens of one state per example ``[E, width]``: variable ``v`` fills the 8-token slot at ``8 v``."""
    num_examples = len(state)
    tokens = np.full((num_examples, width), PAD, dtype=np.int64)
    slot = 1 + VALUE_TOKENS
    for e, row in enumerate(state):
        if len(row) * slot > width:
            raise ValueError(f"state needs {len(row) * slot} tokens, more than width={width}")
        for v, value in enumerate(row):  # fixed slots: element k of every variable sits at a fixed offset
            toks = [VAR0 + v, *value_tokens(value)]
            tokens[e, v * slot : v * slot + len(toks)] = toks
    return tokens


def state_width(num_variables: int) -> int:
    """Tokens a state with ``num_variables`` variables may need."""
    return num_variables * (1 + VALUE_TOKENS)


def target_block(values: tuple[dsl.Value, ...]) -> np.ndarray:
    """``[E, 1 + TARGET_TOKENS]``: ``OUT`` followed by each example's value tokens."""
    block = np.full((len(values), 1 + TARGET_TOKENS), PAD, dtype=np.int64)
    block[:, 0] = OUT
    for e, value in enumerate(values):
        toks = value_tokens(value)
        block[e, 1 : 1 + len(toks)] = toks
    return block


def chunk_subgoal_tokens(tokens: torch.Tensor, num_examples: int) -> torch.Tensor:
    """Split generated subgoal sequences ``[N, T]`` into per-example target blocks
    ``[N, E, 1 + TARGET_TOKENS]`` (``OUT`` then the chunk's tokens, truncated; missing chunks empty).

    Any token sequence maps to a block, so the frozen synthesizer can score malformed subgoals too.
    """
    n = tokens.shape[0]
    block = torch.full((n, num_examples, 1 + TARGET_TOKENS), PAD, dtype=torch.long, device=tokens.device)
    block[:, :, 0] = OUT
    is_eos = tokens == EOS
    alive = torch.cumsum(is_eos.long(), dim=1) == 0  # strictly before the first EOS
    is_sep = (tokens == SEP) & alive
    chunk = torch.cumsum(is_sep.long(), dim=1) - is_sep.long()
    content = alive & ~is_sep & (tokens != PAD) & (tokens != BOS)
    # position of each content token inside its chunk: content tokens before it, less those before the
    # chunk's separator (the count is non-decreasing, so a running max reads the latest separator's)
    before = torch.cumsum(content.long(), dim=1) - content.long()
    within = before - torch.cummax(torch.where(is_sep, before, 0), dim=1).values
    keep = content & (chunk < num_examples) & (within < TARGET_TOKENS)
    r, t = torch.nonzero(keep, as_tuple=True)
    block[r, chunk[r, t], 1 + within[r, t]] = tokens[r, t]
    return block
