"""SpectralKV's kept caches on fixed cases: save them, or compare them with a saved set (issue #47).

    PYTHONPATH=src python benchmarks/spectralkv/kept_caches.py --save before.pt    # on the old code
    PYTHONPATH=src python benchmarks/spectralkv/kept_caches.py --compare before.pt # on the new code

A speed change that should not change the method is checked here: 52 prefills (the zoo's tiny-llama and
tiny-llama-ctx, stock Llama GQA-4 and Qwen2 GQA-7 configs with random weights; 1k and 4k tokens of
held-out text at two offsets; entropy and uniform budgets; keep 12.5% and 50%) and every layer's kept
keys and values, compared bit for bit. A difference is printed per layer as the number of kept rows that
differ (or the shapes, when a layer's budget moved).
"""

from __future__ import annotations

import argparse

import torch
from ratio_spectralkv import stock_model
from transformers import DynamicCache

from neurips26 import zoo
from neurips26.methods.spectralkv import SpectralKVPress
from neurips26.zoo.evaluation import heldout_tokens

Case = tuple[str, int, int, str, float]


def kept_caches() -> dict[Case, list[tuple[torch.Tensor, torch.Tensor]]]:
    """Every case's kept (keys, values) per layer."""
    tiny, tokenizer = zoo.load("tiny-llama")
    models = {
        "tiny-llama": tiny,
        "tiny-llama-ctx": zoo.load("tiny-llama-ctx")[0],
        "stock-llama-gqa4": stock_model("stock-llama-gqa4"),
        "stock-qwen2-gqa7": stock_model("stock-qwen2-gqa7"),
    }
    stream = torch.from_numpy(heldout_tokens(tokenizer).haystack.ids.astype("int64"))
    out = {}
    for name, model in models.items():
        for n in (1024, 4096):
            for start in (0, 5000):
                for mode in ("entropy", "uniform"):
                    for keep in (0.125, 0.5):
                        if name == "stock-qwen2-gqa7" and (keep == 0.5 or start):
                            continue  # the GQA-7 shape once per context and mode
                        press = SpectralKVPress(compression_ratio=1 - keep, budget_mode=mode)
                        cache = DynamicCache()
                        with torch.no_grad(), press(model):
                            model(stream[start : start + n][None], past_key_values=cache)
                        kept = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
                        out[(name, n, start, mode, keep)] = kept
    return out


def differences(layers: list, reference: list) -> list[tuple[int, int | str, int]]:
    """(layer, differing kept rows or the two shapes, kept rows) for each layer that differs."""
    found = []
    for layer, ((keys, values), (ref_keys, ref_values)) in enumerate(zip(layers, reference, strict=True)):
        if keys.shape != ref_keys.shape:
            found.append((layer, f"shape {tuple(keys.shape)} vs {tuple(ref_keys.shape)}", ref_keys.shape[2]))
        elif not (torch.equal(keys, ref_keys) and torch.equal(values, ref_values)):
            rows = int(((keys != ref_keys).any(-1) | (values != ref_values).any(-1)).sum())
            found.append((layer, rows, ref_keys.shape[1] * ref_keys.shape[2]))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--save", help="write the kept caches to this file")
    parser.add_argument("--compare", help="compare the kept caches with this file")
    args = parser.parse_args()
    torch.set_num_threads(1)
    caches = kept_caches()
    if args.save:
        torch.save(caches, args.save)
        print(f"saved {len(caches)} cases to {args.save}")
    if args.compare:
        reference = torch.load(args.compare)
        same = 0
        for case, layers in caches.items():
            found = differences(layers, reference[case])
            same += not found
            if found:
                print("differs:", case, found)
        print(f"{same} / {len(caches)} cases bit-identical")


if __name__ == "__main__":
    main()
