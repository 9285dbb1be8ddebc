"""Short pilots for growing in-context retrieval in the zoo's tiny-llama (issue #4).

Trains the ``tiny-llama`` architecture with a candidate curriculum through the zoo's own training loop
(``neurips26.zoo.training.train_model``) and measures, every ``--eval-every`` steps, what the retrieval
bar needs: copying of random tokens repeated with period P at the full vocabulary (content-matching
induction, not a positional look-back) and exact-match key->value / MQAR accuracy on held-out probes.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/zoo_induction_pilot.py \\
        --phases '[{"seq_len": 64, "batch": 32, "steps": 500, "mixture": {"randrep": 1.0},
                    "randrep_max_period": 16}]'

Prints one line per evaluation and writes every row to ``--out`` (JSON) when given.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np
import torch

from neurips26.zoo.evaluation import heldout_tokens, retrieval_accuracy
from neurips26.zoo.specs import TrainConfig, get_spec
from neurips26.zoo.tokenizer import load_tokenizer
from neurips26.zoo.training import randrep_alphabet_ids, train_model


def periodic_copy(
    model, vocab_size: int, seq_len: int, period: int, n: int = 16, alphabet: int | None = None
) -> dict[str, float]:
    """Random tokens repeated with ``period``, scored after the first period.

    Returns the argmax accuracy (``acc``), the mean probability of the right token (``p_right``) and the
    mean probability mass on the ``period`` tokens of the chunk (``p_chunk``). A model at the in-context
    *unigram* stage (copy some token seen in the context, Edelman et al. 2024) spreads ``p_chunk`` evenly,
    so ``p_right ~ p_chunk / period``; an induction head puts it all on the right token.
    """
    rng = np.random.default_rng([99, seq_len, period])
    pool = np.arange(1, vocab_size) if alphabet is None else randrep_alphabet_ids(alphabet, vocab_size)
    chunks = torch.from_numpy(pool[np.stack([rng.permutation(len(pool))[:period] for _ in range(n)])])
    ids = chunks.repeat(1, seq_len // period + 1)[:, :seq_len]
    with torch.no_grad():
        probs = model(input_ids=ids).logits.float().softmax(-1)[:, period - 1 : -1]
    target = ids[:, period:]
    p_right = probs.gather(-1, target[..., None])[..., 0]
    p_chunk = probs.gather(-1, chunks[:, None, :].expand(-1, target.shape[1], -1)).sum(-1)
    acc = (probs.argmax(-1) == target).float().mean()
    return {"acc": float(acc), "p_right": float(p_right.mean()), "p_chunk": float(p_chunk.mean())}


def format_stats(tokenizer, held) -> dict:
    """How the probe lines tokenize, and how often the haystack holds the answer's left context.

    The first answer digit is predicted at the lone-space token; a one-hop induction head keyed on that
    token competes with every ``space digit`` pair of the haystack.
    """
    lines = {
        "kv binding": "    offset = 4821\n",
        "kv query": "assert offset == 4821\n",
        "passkey needle": "# The pass key is 71432. Remember",
        "passkey query": "# What is the pass key? The pass key is 71432.\n",
    }
    out: dict = {k: tokenizer.convert_ids_to_tokens(tokenizer.encode(v)) for k, v in lines.items()}
    ids = held.haystack.ids
    tok = tokenizer.convert_tokens_to_ids
    vocab = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    digit = np.array([any(c.isdigit() for c in token) for token in vocab])
    per_2k = 2048 / len(ids)
    space_digit = (ids[:-1] == tok("Ġ")) & digit[ids[1:]]
    assign_digit = (ids[:-2] == tok("Ġ=")) & space_digit[1:]
    out["haystack 'Ġ digit' per 2k tokens"] = round(float(space_digit.sum() * per_2k), 2)
    out["haystack 'Ġ= Ġ digit' per 2k tokens"] = round(float(assign_digit.sum() * per_2k), 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phases", help="JSON list of Phase dicts")
    ap.add_argument("--format-stats", action="store_true", help="print the probe-format analysis and exit")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--min-lr-ratio", type=float, default=0.1, help="1.0 keeps the peak lr after warm-up")
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--answer-weight", type=float, default=4.0)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--periods", type=int, nargs="+", default=[8, 32], help="copy periods (128 tokens)")
    ap.add_argument("--probe-samples", type=int, default=16)
    ap.add_argument("--alphabet", type=int, default=None, help="also score copying within this alphabet")
    ap.add_argument("--model-config", default="{}", help="JSON architecture overrides (rope_theta)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.format_stats:
        tokenizer = load_tokenizer()
        for key, value in format_stats(tokenizer, heldout_tokens(tokenizer)).items():
            print(f"{key}: {value}")
        return
    if not args.phases:
        ap.error("--phases is required (unless --format-stats)")
    cfg = TrainConfig(
        phases=json.loads(args.phases),
        learning_rate=args.lr,
        warmup_steps=args.warmup,
        min_lr_ratio=args.min_lr_ratio,
        weight_decay=args.weight_decay,
        answer_weight=args.answer_weight,
    )
    base = get_spec("tiny-llama")
    model_config = {**base.model_config, **json.loads(args.model_config)}
    spec = dataclasses.replace(base, model_config=model_config, train=cfg)
    tokenizer = load_tokenizer()
    held = heldout_tokens(tokenizer)
    vocab = len(tokenizer)
    rows: list[dict] = []
    start = time.perf_counter()

    def evaluate(step: int, model) -> None:
        if step % args.eval_every and step != cfg.total_steps:
            return
        model.eval()
        row = {"step": step, "elapsed_s": round(time.perf_counter() - start, 1)}
        for period in args.periods:
            for key, value in periodic_copy(model, vocab, 128, period).items():
                row[f"P{period}_{key}"] = round(value, 4)
        if args.alphabet:
            row["alpha_P16_acc"] = periodic_copy(model, vocab, 128, 16, alphabet=args.alphabet)["acc"]
        n = args.probe_samples
        row["kv1@128"] = retrieval_accuracy(model, tokenizer, "kv", 128, n_samples=n, data=held, n_bindings=1)
        row["kv2@128"] = retrieval_accuracy(model, tokenizer, "kv", 128, n_samples=n, data=held, n_bindings=2)
        row["kv4@512"] = retrieval_accuracy(model, tokenizer, "kv", 512, n_samples=n, data=held)
        row["mqar@256"] = retrieval_accuracy(model, tokenizer, "mqar", 256, n_samples=n, data=held, n_pairs=8)
        rows.append(row)
        print(json.dumps(row), flush=True)

    _, log = train_model(spec, None, log=None, on_step=evaluate)
    tail = log[-20:]
    summary = {
        "loss_last20": float(np.mean([r["loss"] for r in tail])),
        "answer_acc_last20": float(np.mean([r["answer_acc"] for r in tail])),
        "train_s": log[-1]["elapsed_s"],
    }
    print(json.dumps(summary), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "evals": rows, "summary": summary, "train_log": log}, f, indent=1)


if __name__ == "__main__":
    main()
