"""Print the SOLAR experiment's metrics and per-program rows for one profile, without the harness runner.

``python -m neurips26.methods.solar.suite_rows [smoke|default|full] [--rows] [--suite torch|jax]``: the
whole spec and every system's count per program, for reading a published result line by line.
"""

from __future__ import annotations

from typing import Any

from neurips26.methods.solar.experiment import EXPERIMENT, TORCH_FLOP_COUNTERS, cpu_spec, evaluate


def _jax_row_text(row: dict[str, Any]) -> str:
    """A JAX baseline's count, or n/a with the reason when the library leaves MACs uncounted."""
    if row["gaps"] and row["flops"] < row["hand_flops"]:
        return f"n/a ({row['flops']:,}; {'; '.join(sorted(set(row['gaps'])))})"
    return f"{row['flops']:,}"


def main() -> None:
    """Run one profile for every system without the harness runner and print metrics (and per-program rows
    with ``--rows``): ``python -m neurips26.methods.solar.suite_rows [smoke|default|full] [--rows]
    [--suite torch|jax]``."""
    import argparse
    import json

    from neurips26.bench.experiment import SilentProgress

    parser = argparse.ArgumentParser()
    parser.add_argument("profile", nargs="?", default="default")
    parser.add_argument("--rows", action="store_true")
    parser.add_argument("--suite", choices=["torch", "jax"], help="run one grid point only")
    args = parser.parse_args()
    profile = EXPERIMENT.profile(args.profile)
    per_suite: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for point in profile.points():
        if args.suite and point.get("suite") != args.suite:
            continue
        config = EXPERIMENT.config_for(profile, point, {})
        per_system = per_suite.setdefault(config.suite, {})
        spec = cpu_spec(config)  # systems are built without a spec and bound to the measured one here
        for name, factory in EXPERIMENT.systems.items():
            system = factory(config).on(spec)
            if config.suite not in system.frameworks:
                continue
            metrics, rows = evaluate(system, config, SilentProgress())
            per_system[name] = rows
            print(
                json.dumps(
                    {"suite": config.suite, "system": name, **{k: round(v, 4) for k, v in metrics.items()}}
                )
            )
    spec = cpu_spec(EXPERIMENT.config_for(profile, {}, {}))
    print(
        json.dumps(
            {
                "cpu_local": spec.notes,
                "bandwidth_GBps": spec.dram_bandwidth_Bps / 1e9,
                "fp32_GFLOPs": spec.peak_flops["float32"] / 1e9,
                "spec": spec.to_dict(),  # the whole spec the bounds used, with its calibration record
            }
        )
    )
    if not args.rows:
        return
    for row in per_suite.get("torch", {}).get("solar", []):
        naive = next(r for r in per_suite["torch"]["naive_roofline"] if r["program"] == row["program"])
        print(
            json.dumps(
                {
                    "program": row["program"],
                    "flops": row["flops"],
                    "flops_conventional": row["conventional_flops"],
                    **{
                        f"flops_{name}": next(r for r in rows if r["program"] == row["program"])["flops"]
                        for name, rows in per_suite["torch"].items()
                        if name in TORCH_FLOP_COUNTERS
                    },
                    "cold_ms": round(1e3 * row["cold"], 3),
                    "noise_band": round(row["noise"], 4),
                    "violated": row["violated"],
                    "warm_ms": round(1e3 * row["warm"], 3),
                    **{k: round(v, 4) for k, v in row.items() if k.startswith("ratio_")},
                    "naive_ratio": round(naive["bound"] / row["cold"], 4),
                }
            )
        )
    jax_rows = per_suite.get("jax", {})
    if jax_rows:
        print(
            "| program | hand FLOPs | "
            + " | ".join(f"{n} FLOPs" for n in jax_rows)
            + " | cold ms | "
            + " | ".join(f"{n} bound/cold" for n in jax_rows)
            + " |"
        )
        print("|---" * (3 + 2 * len(jax_rows)) + "|")
        for i, row in enumerate(jax_rows["solar"]):
            cells = [_jax_row_text(rows[i]) for rows in jax_rows.values()]
            ratios = [f"{rows[i]['bound'] / rows[i]['cold']:.3f}" for rows in jax_rows.values()]
            print(
                f"| {row['program']} | {row['hand_flops']:,} | "
                + " | ".join(cells)
                + f" | {1e3 * row['cold']:.3f} | "
                + " | ".join(ratios)
                + " |"
            )


if __name__ == "__main__":
    main()
