"""Why a DACS "better" claim is inconclusive: paired spread, effect size and the pairs a verdict needs.

Reads a published result (``results/dacs/<profile>.json``) and, for each grid point of the coupled claims,
pairs DACS with every baseline by seed and prints: the mean paired difference, its standard deviation,
the effect size d = mean / sd, the 95% Student-t interval, each system's own seed-to-seed spread, and
the number of pairs n at which a Student-t interval of that half-width would exclude 0 if the mean and
sd stayed as measured (smallest n with t_{n-1} * sd / sqrt(n) < mean). The baseline the harness compares
with is the one with the best mean accuracy.

    python benchmarks/dacs/dacs_paired_spread.py results/dacs/default.json
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict

from scipy import stats


def pairs_needed(mean: float, sd: float, limit: int = 500) -> int | None:
    """Smallest n >= 2 whose t-interval half-width is below ``mean`` (None if mean <= 0 or n > limit)."""
    if mean <= 0:
        return None
    if sd == 0:
        return 2
    for n in range(2, limit + 1):
        if stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n) < mean:
            return n
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", help="results/dacs/<profile>.json")
    parser.add_argument("--metric", default="target_accuracy")
    args = parser.parse_args()
    with open(args.result, encoding="utf-8") as handle:
        result = json.load(handle)
    values: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for cell in result["cells"]:
        value = (cell.get("metrics") or {}).get(args.metric)
        if cell["status"] == "ok" and value is not None:
            point = json.dumps(cell["point"], sort_keys=True)
            values[(point, cell["system"])][cell["seed"]] = value
    points = sorted({point for point, _ in values})
    for point in points:
        ours = values.get((point, "dacs"))
        if not ours:
            continue
        print(f"\n{point}  (ours: dacs, mean {sum(ours.values()) / len(ours):.3f})")
        header = f"{'system':14s} {'mean':>6s} {'sd':>6s} | {'diff':>7s} {'sd':>6s} {'d':>5s}"
        print(f"{header} {'95% t-CI':>18s} {'n':>4s}")
        rows = []
        for (p, system), seeds in values.items():
            if p != point or system == "dacs":
                continue
            common = sorted(set(seeds) & set(ours))
            diffs = [ours[s] - seeds[s] for s in common]
            n = len(diffs)
            own = [seeds[s] for s in common]
            mean_own = sum(own) / n
            sd_own = math.sqrt(sum((v - mean_own) ** 2 for v in own) / (n - 1)) if n > 1 else float("nan")
            mean = sum(diffs) / n
            sd = math.sqrt(sum((v - mean) ** 2 for v in diffs) / (n - 1)) if n > 1 else float("nan")
            half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n) if n > 1 else float("nan")
            rows.append((mean_own, system, sd_own, mean, sd, half, n))
        for mean_own, system, sd_own, mean, sd, half, _ in sorted(rows, reverse=True):
            need = pairs_needed(mean, sd)
            effect = mean / sd if sd > 0 else float("inf")
            interval = f"[{mean - half:+.3f}, {mean + half:+.3f}]"
            print(
                f"{system:14s} {mean_own:6.3f} {sd_own:6.3f} | {mean:+7.3f} {sd:6.3f} {effect:5.2f} "
                f"{interval:>18s} {need if need else '-':>4}"
            )


if __name__ == "__main__":
    main()
