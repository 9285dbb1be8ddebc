"""Multiple-choice scoring with a causal LM: log-likelihood of each one-token choice after a prompt.

A candidate prompt (an instruction, optionally with demonstrations) is a shared prefix of every item,
so it is encoded once and its key/value cache reused for every batch of items (the items are
right-padded after it). Each choice is one token (the tasks keep only such items), so one forward pass
per batch yields every choice's log-probability at the item's last token; the LM head runs at those
positions only. Deterministic: no sampling, fixed batches.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from neurips26.methods.poes.wordnet_tasks import ChoiceItem

ITEM_TEMPLATES = {
    "category": "Definition: {subject}\nCategory:",
    "hypernym": "Word: {subject}\nA kind of:",
    "antonym": "Word: {subject}\nOpposite:",
}


def render_item(task: str, item: ChoiceItem) -> str:
    """The text scored after the prompt: the item, ending where the answer word would start."""
    if task not in ITEM_TEMPLATES:
        raise ValueError(f"task must be one of {sorted(ITEM_TEMPLATES)}, got {task!r}")
    return ITEM_TEMPLATES[task].format(subject=item.subject)


def render_demo(task: str, item: ChoiceItem) -> str:
    """A worked example for a few-shot prompt: the item and its answer."""
    return f"{render_item(task, item)} {item.choices[item.answer]}\n\n"


def choice_token_ids(tokenizer: Any, choices: Sequence[str]) -> list[int] | None:
    """The token of each choice (with its leading space), or None when one is not a single token."""
    ids = [tokenizer(" " + c, add_special_tokens=False).input_ids for c in choices]
    return [i[0] for i in ids] if all(len(i) == 1 for i in ids) else None


def choice_log_probs_from_ids(
    model: Any,
    prefix_ids: Sequence[int],
    item_ids: Sequence[Sequence[int]],
    choice_ids: np.ndarray,
    pad_id: int,
    batch_size: int = 50,
) -> np.ndarray:
    """log p(choice | prefix + item) for every item (rows) and choice (columns), from token ids.

    ``prefix_ids`` (>= 1 token, e.g. BOS) is run once; its cache is copied for each batch of items.
    ``choice_ids``: (n_items, n_choices) int token ids. Returns float32 (n_items, n_choices).
    """
    import torch

    if len(prefix_ids) == 0:
        raise ValueError("prefix_ids must hold at least one token (e.g. BOS)")
    choice_ids = np.asarray(choice_ids)
    if choice_ids.ndim != 2 or len(choice_ids) != len(item_ids):
        raise ValueError(f"choice_ids must be (n_items={len(item_ids)}, n_choices), got {choice_ids.shape}")
    out = np.empty(choice_ids.shape, dtype=np.float32)
    with torch.inference_mode():
        prefix = torch.tensor([list(prefix_ids)])
        cache = model(input_ids=prefix, use_cache=True).past_key_values
        for start in range(0, len(item_ids), batch_size):
            batch = item_ids[start : start + batch_size]
            lengths = torch.tensor([len(ids) for ids in batch])
            if int(lengths.min()) == 0:
                raise ValueError("item_ids must hold at least one token per item")
            ids = torch.full((len(batch), int(lengths.max())), pad_id)
            for row, tokens in enumerate(batch):
                ids[row, : len(tokens)] = torch.tensor(tokens)
            item_mask = (torch.arange(ids.shape[1])[None] < lengths[:, None]).long()
            mask = torch.cat([torch.ones(len(batch), prefix.shape[1], dtype=torch.long), item_mask], dim=1)
            batch_cache = copy.deepcopy(cache)
            batch_cache.batch_repeat_interleave(len(batch))
            hidden = model.model(
                input_ids=ids, attention_mask=mask, past_key_values=batch_cache, use_cache=True
            ).last_hidden_state
            last = hidden[torch.arange(len(batch)), lengths - 1]
            log_probs = torch.log_softmax(model.lm_head(last).float(), dim=-1)
            rows = torch.as_tensor(choice_ids[start : start + batch_size])
            out[start : start + len(batch)] = log_probs.gather(1, rows).numpy()
    return out


def choice_log_probs(
    model: Any, tokenizer: Any, task: str, prefix: str, items: Sequence[ChoiceItem], batch_size: int = 50
) -> np.ndarray:
    """log p(choice | prompt ``prefix`` + item) for every item of ``task``: float32 (n_items, 4)."""
    choice_ids = []
    for item in items:
        ids = choice_token_ids(tokenizer, item.choices)
        if ids is None:
            raise ValueError(f"item {item.id!r} has a choice that is not a single token: {item.choices}")
        choice_ids.append(ids)
    prefix_ids = tokenizer(prefix, add_special_tokens=True).input_ids
    item_ids = [tokenizer(render_item(task, item), add_special_tokens=False).input_ids for item in items]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    return choice_log_probs_from_ids(model, prefix_ids, item_ids, np.array(choice_ids), pad, batch_size)
