"""Calibrate the six SAST targets once: MiniCLIP zero-shot top-1 per difficulty level (issue #27).

Run before any SAST tuning. Writes the table and the chosen levels (the easiest level whose zero-shot
accuracy is within 25-70 % and at least 1.5x chance) to the committed
``src/neurips26/methods/sast/checkpoints/mini-clip/calibration.json``, which ``make_target`` reads;
prints Markdown.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/sast/sast_calibrate.py
"""

from __future__ import annotations

import json

import torch

from neurips26.methods.sast import MiniCLIPBackbone, SASTConfig, ZeroShot
from neurips26.methods.sast.clip_targets import TARGETS, make_target
from neurips26.methods.sast.miniclip import CHECKPOINT_DIR

LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)


def main() -> None:
    torch.set_num_threads(1)
    backbone = MiniCLIPBackbone()
    table: dict[str, dict[str, float]] = {}
    for name, spec in TARGETS.items():
        table[name] = {}
        for level in LEVELS:
            data = make_target(name, 30, seed=1000, difficulty=level)  # seed 1000: never an experiment seed
            trainer = ZeroShot(backbone, spec.class_names, spec.templates, SASTConfig(epochs=0))
            classifier = trainer.adapt(torch.from_numpy(data.images))
            with torch.no_grad():
                pred = classifier(torch.from_numpy(data.images)).argmax(1).numpy()
            table[name][str(level)] = float((pred == data.labels).mean())
        chance = 1.0 / len(spec.class_names)
        fits = [lv for lv in LEVELS if max(0.25, 1.5 * chance) <= table[name][str(lv)] <= 0.70]
        # the easiest level in the band (at least 1.5x chance); else the level closest to the band
        distance = {lv: max(0.25 - table[name][str(lv)], table[name][str(lv)] - 0.70, 0.0) for lv in LEVELS}
        table[name]["chosen"] = fits[0] if fits else min(LEVELS, key=lambda lv: (distance[lv], lv))
        table[name]["in_band"] = bool(fits)
    (CHECKPOINT_DIR / "calibration.json").write_text(json.dumps(table, indent=2) + "\n")
    print("| target | knob | " + " | ".join(f"d={lv}" for lv in LEVELS) + " | chosen |")
    print("|---|---|" + "---|" * (len(LEVELS) + 1))
    for name, row in table.items():
        cells = " | ".join(f"{row[str(lv)]:.2f}" for lv in LEVELS)
        band = "" if row["in_band"] else " (no level in band)"
        print(f"| {name} | {TARGETS[name].knob} | {cells} | {row['chosen']}{band} |")


if __name__ == "__main__":
    main()
