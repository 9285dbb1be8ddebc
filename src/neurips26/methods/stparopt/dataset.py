"""Loop data sets for training and evaluation: generated programs, confirmed labels, profiles, graphs.

Three disjoint input streams per program (ours, against label leakage): *labelling* inputs decide the
exact label (exhaustive dependence check), *profiling* inputs feed the dynamic branch (sampled, other
seeds and another trip count), and *verification* inputs check the generated CUDA. Built sets are
cached on disk by their parameters, so every system of an experiment reads the same set.
"""

from __future__ import annotations

import hashlib
import pickle
from dataclasses import dataclass

import torch

from neurips26.methods.stparopt.frontend import CFunction, parse_function
from neurips26.methods.stparopt.loopgen import FAMILIES, generate_dataset
from neurips26.methods.stparopt.pipeline import example_graph
from neurips26.methods.stparopt.profiler import (
    LoopProfile,
    cache_dir,
    exhaustive_labels,
    profile_loops,
    runtime_fingerprint,
)
from neurips26.methods.stparopt.programs import LoopProgram

LABEL_SEEDS = (1, 2)  # labelling inputs; profiling uses seeds >= 1000, verification 101+


@dataclass
class LoopSet:
    """Programs with their parsed functions, confirmed labels and profiles (one loop per program)."""

    programs: list[LoopProgram]
    functions: list[CFunction]
    labels: torch.Tensor  # (P,) long
    profiles: list[LoopProfile | None]
    label_mismatches: int  # programs whose constructed label the exhaustive check contradicted

    def graphs(self, with_profiles: bool = True, profiled: list[bool] | None = None) -> list:
        """Graphs with tokens; ``profiled[k] = False`` hides loop k's profile (zeros)."""
        out = []
        for k, (f, p) in enumerate(zip(self.functions, self.profiles, strict=True)):
            use = with_profiles and (profiled is None or profiled[k])
            out.append(example_graph(f, f.loops[0], p if use else None))
        return out

    @property
    def groups(self) -> list[str]:
        return [p.group for p in self.programs]


def build_loopset(
    n_programs: int,
    seed: int,
    families: tuple[str, ...] = FAMILIES,
    *,
    label_n: int = 96,
    profile_n: int = 512,
    profile_runs: int = 2,
    reservoir: int = 32,
    shadow: int = 4096,
) -> LoopSet:
    """Generate, label (constructed label checked exhaustively) and profile ``n_programs`` programs."""
    key = repr(
        (
            n_programs,
            seed,
            tuple(families),
            label_n,
            profile_n,
            profile_runs,
            reservoir,
            shadow,
            LABEL_SEEDS,
            runtime_fingerprint(),
            7,
        )
    )
    path = cache_dir() / f"loopset_{hashlib.sha256(key.encode()).hexdigest()[:24]}.pkl"
    if path.exists():
        programs, labels, mismatches, profiles = pickle.loads(path.read_bytes())
    else:
        programs = generate_dataset(n_programs, seed, tuple(families))
        items = [(p.source, p.function, 0, p.args) for p in programs]
        exact = exhaustive_labels(items, n=label_n, seeds=LABEL_SEEDS)
        mismatches = sum(int(e != p.label) for e, p in zip(exact, programs, strict=True))
        labels = [p.label for p in programs]
        profiles = profile_loops(
            items, n=profile_n, runs=profile_runs, seed=1000 + seed, reservoir=reservoir, shadow=shadow
        )
        path.write_bytes(pickle.dumps((programs, labels, mismatches, profiles)))
    functions = [parse_function(p.source, p.function) for p in programs]
    return LoopSet(programs, functions, torch.tensor(labels, dtype=torch.long), profiles, mismatches)
