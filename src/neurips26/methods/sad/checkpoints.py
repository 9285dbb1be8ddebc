"""Small pre-trained checkpoints for the experiment, reproducible by one command::

    python -m neurips26.methods.sad.checkpoints --out src/neurips26/methods/sad/weights [--size smoke]

One bundle holds: the synthesizer (trained on GT subgoals), the no-decomposition synthesizer (trained on
task outputs), the SL-pretrained decomposer, and for each fine-tuning seed three fine-tunes from that
same start: SL continued (solver-blind), SAD, and RL without ``L_sup``. Weights are stored in float16 to
keep the files small; the hashes of the training tasks' I/O signatures travel with them so fresh test
tasks can be deduplicated against training.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from neurips26.methods.sad.config import SADConfig
from neurips26.methods.sad.models import Decomposer, Synthesizer
from neurips26.methods.sad.sampler import sample_tasks, step_records
from neurips26.methods.sad.training import encode_records, train_sad, train_supervised, train_synthesizer

WEIGHTS_DIR = Path(__file__).parent / "weights"


@dataclass
class BundleSpec:
    """What a checkpoint bundle is trained on and for how long."""

    num_train_tasks: int = 8000  # the decomposers' (and the no-decomposition synthesizer's) tasks
    synth_train_tasks: int = 16000  # the synthesizer's: the first num_train_tasks of them and more
    train_lengths: tuple[int, ...] = (1, 2, 3, 4)
    d_model: int = 128  # the decomposers' (issue: 128-192)
    synthesizer: str = "slots"  # the synthesizers' encoder (models.Synthesizer); older bundles: "tokens"
    synth_d_model: int = 64  # the synthesizers'
    seeded_inits: bool = True  # each model seeded before its initialisation (older bundles: not)
    relations: bool = True  # the synthesizer's relation features (models.relation_features)
    synth_steps: int = 4000
    synth_cosine: bool = True  # the synthesizer's learning rate decays to 0 (half a cosine)
    log_every: int = 500  # held-out synthesizer accuracy every this many steps (0: only at the end)
    nodec_steps: int = 3000  # the same recipe as the synthesizer's (cosine decay), on the decomposers' tasks
    decomposer_steps: int = 1000
    finetune: SADConfig = field(default_factory=SADConfig)
    finetune_seeds: tuple[int, ...] = (0,)
    batch_size: int = 64
    data_seed: int = 12345


SIZES = {
    "default": BundleSpec(),
    "smoke": BundleSpec(
        num_train_tasks=300,
        synth_train_tasks=300,
        synth_steps=60,
        nodec_steps=60,
        log_every=0,
        decomposer_steps=60,
        finetune=SADConfig(steps=8),
        finetune_seeds=(0,),
    ),
}


def signature_hash(signature: str) -> int:
    """64-bit hash of a task's I/O signature (deduplication against the training tasks)."""
    return int.from_bytes(hashlib.blake2b(signature.encode(), digest_size=8).digest(), "little", signed=True)


def _half(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.to(torch.float16) for k, v in module.state_dict().items()}


def _synthesizer(spec: BundleSpec | dict) -> Synthesizer:
    """An untrained synthesizer of a bundle's size (``spec`` as a :class:`BundleSpec` or stored dict)."""
    spec = spec if isinstance(spec, dict) else asdict(spec)
    d = spec.get("synth_d_model", spec["d_model"])  # older bundles: one width for every model
    return Synthesizer(d_model=d, ff=2 * d, relations=spec.get("relations", False))


def _calibration(synth: Synthesizer, held) -> str:
    """Top-1 / top-3 exact match of the GT statement given the GT subgoal on held-out steps."""
    with torch.no_grad():
        top = synth.log_probs(held.context, held.subgoal_block).topk(3, dim=1).indices
    hit = top == held.statement[:, None]
    return (
        f"given GT subgoals on held-out steps: top-1 {hit[:, 0].float().mean():.3f}, "
        f"top-3 {hit.any(1).float().mean():.3f}"
    )


def _held_out(decomposer: Decomposer, synth: Synthesizer, held) -> str:
    """Greedy subgoals on held-out steps: synthesizer reward and GT exact match."""
    with torch.no_grad():
        greedy = decomposer.generate(held.decomposer_input(), greedy=True)
        reward = synth.score(held.context, greedy, held.statement).mean()
        match = (greedy == held.subgoal_seq[:, : greedy.shape[1]]).all(1).float().mean()
    return f"reward {float(reward):.3f}, GT match {float(match):.3f}"


def build_bundle(spec: BundleSpec, log=print, reuse: dict[str, dict] | None = None) -> dict:
    """Sample the training data and train every model of a bundle (see the module doc); ``reuse`` maps
    model names (``no_decomposition``, ``sl_base``, ``sl/<seed>``) to state dicts taken as trained
    (see :func:`reusable`)."""
    start = time.perf_counter()
    rng = np.random.default_rng(spec.data_seed)
    # the sampler draws sequentially: the first num_train_tasks tasks are those of a smaller draw
    tasks = sample_tasks(rng, max(spec.num_train_tasks, spec.synth_train_tasks), spec.train_lengths)
    data = encode_records(step_records(tasks[: spec.num_train_tasks]))
    synth_data = encode_records(step_records(tasks[: spec.synth_train_tasks]))
    log(
        f"data: {len(tasks)} tasks, {len(data)} decomposer / {len(synth_data)} synthesizer step records "
        f"({time.perf_counter() - start:.0f} s)"
    )
    reuse = reuse or {}
    held = encode_records(
        step_records(sample_tasks(np.random.default_rng(spec.data_seed + 1), 200, spec.train_lengths))
    )
    torch.manual_seed(spec.data_seed)
    synth = _synthesizer(spec)

    def accuracy(step: int) -> None:
        if step + 1 == spec.synth_steps or (spec.log_every and (step + 1) % spec.log_every == 0):
            synth.eval()
            elapsed = time.perf_counter() - start
            log(f"synthesizer step {step + 1}: {_calibration(synth, held)} ({elapsed:.0f} s)")
            synth.train()

    if "synthesizer" in reuse:
        synth.load_state_dict({k: v.float() for k, v in reuse["synthesizer"].items()})
        log(f"synthesizer: reused; {_calibration(synth.eval(), held)}")
    else:
        h = train_synthesizer(
            synth,
            synth_data,
            "subgoal",
            spec.synth_steps,
            spec.batch_size,
            seed=0,
            on_step=accuracy,
            cosine=spec.synth_cosine,
        )
        log(f"synthesizer: loss {h.mean('loss'):.3f} ({h.seconds:.0f} s)")
        # SAD trains against the float16 weights the bundle stores (and the experiment loads), so a
        # rebuild that reuses this synthesizer fine-tunes exactly as this one does
        synth.load_state_dict({k: v.float() for k, v in _half(synth).items()})
    # every model's initialisation is seeded on its own, so reusing one never changes another's
    torch.manual_seed(spec.data_seed + 1)
    nodec = _synthesizer(spec)
    if "no_decomposition" in reuse:
        nodec.load_state_dict({k: v.float() for k, v in reuse["no_decomposition"].items()})
        log("no-decomposition synthesizer: reused")
    else:
        h = train_synthesizer(
            nodec, data, "output", spec.nodec_steps, spec.batch_size, seed=1, cosine=spec.synth_cosine
        )
        log(f"no-decomposition synthesizer: loss {h.mean('loss'):.3f} ({h.seconds:.0f} s)")
    torch.manual_seed(spec.data_seed + 2)
    base = Decomposer(d_model=spec.d_model, ff=2 * spec.d_model)
    if "sl_base" in reuse:
        base.load_state_dict({k: v.float() for k, v in reuse["sl_base"].items()})
        log(f"SL decomposer: reused; held-out {_held_out(base, synth, held)}")
    else:
        h = train_supervised(base, data, spec.decomposer_steps, spec.batch_size, seed=2)
        log(
            f"SL decomposer: loss {h.mean('loss'):.3f} ({h.seconds:.0f} s); "
            f"held-out {_held_out(base, synth, held)}"
        )
    bundle = {
        "spec": {**asdict(spec), "finetune": asdict(spec.finetune)},
        "synthesizer": _half(synth),
        "no_decomposition": _half(nodec),
        "sl_base": _half(base),
        "finetuned": {},
        "train_hashes": np.array([signature_hash(t.signature()) for t in tasks], dtype=np.int64),
    }
    ft = spec.finetune
    for seed in spec.finetune_seeds:
        runs = {
            "sl": lambda d, s=seed: train_supervised(
                d, data, ft.steps, ft.batch_size, ft.lr, seed=100 + s, grad_clip=ft.grad_clip
            ),
            "sad": lambda d, s=seed: train_sad(d, synth, data, ft, seed=100 + s),
            "rl_only": lambda d, s=seed: train_sad(
                d, synth, data, SADConfig(**{**asdict(ft), "sup_weight": 0.0}), seed=100 + s
            ),
        }
        for name, fit in runs.items():
            model = copy.deepcopy(base)
            if f"{name}/{seed}" in reuse:
                model.load_state_dict({k: v.float() for k, v in reuse[f"{name}/{seed}"].items()})
                log(f"seed {seed} {name}: reused; held-out {_held_out(model, synth, held)}")
                bundle["finetuned"][f"{name}/{seed}"] = _half(model)
                continue
            h = fit(model)
            reward = h.mean("reward_greedy")  # SL logs no reward
            log(
                f"seed {seed} {name}: sup {h.mean('sup'):.3f}"
                + ("" if np.isnan(reward) else f", training greedy reward {reward:.3f}")
                + f" ({h.seconds:.0f} s)"
            )
            log(f"  held-out {_held_out(model, synth, held)}")
            bundle["finetuned"][f"{name}/{seed}"] = _half(model)
    log(f"total {time.perf_counter() - start:.0f} s")
    return bundle


def reusable(old: dict, spec: BundleSpec) -> dict[str, dict]:
    """The models of bundle ``old`` that ``spec`` would train identically (same data, sizes, steps and
    seeds): the synthesizer, the no-decomposition synthesizer, the SL decomposer and its SL-continued
    fine-tunes (none of which reads another model). SAD and RL-only are always retrained."""
    before, now = old["spec"], {**asdict(spec), "finetune": asdict(spec.finetune)}
    shared = ("num_train_tasks", "train_lengths", "batch_size", "data_seed")
    same = lambda *keys: all(list(np.atleast_1d(before.get(k))) == list(np.atleast_1d(now[k])) for k in keys)  # noqa: E731
    out: dict[str, dict] = {}
    synthesizers = ("synthesizer", "synth_d_model", "relations", "synth_cosine")
    if same(*shared, *synthesizers, "synth_train_tasks", "synth_steps"):
        out["synthesizer"] = old["synthesizer"]
    if same(*shared, *synthesizers, "nodec_steps", "seeded_inits"):
        out["no_decomposition"] = old["no_decomposition"]
    if same(*shared, "d_model", "decomposer_steps", "seeded_inits"):
        out["sl_base"] = old["sl_base"]
        if before["finetune"] == now["finetune"]:
            out.update({k: v for k, v in old["finetuned"].items() if k.startswith("sl/")})
    return out


def load_bundle(path: str | Path) -> dict:
    """Load a bundle written by :func:`build_bundle` (``torch.save``)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"no SAD checkpoint at {path}; build one with "
            f"`python -m neurips26.methods.sad.checkpoints --out {path.parent}`"
        )
    return torch.load(path, map_location="cpu", weights_only=False)


def model_from(bundle: dict, key: str) -> torch.nn.Module:
    """Instantiate one model of a bundle: ``synthesizer``, ``no_decomposition``, ``sl_base`` or
    ``finetuned/<name>/<seed>``."""
    d = bundle["spec"]["d_model"]
    if key in ("synthesizer", "no_decomposition"):
        if bundle["spec"].get("synthesizer", "tokens") != "slots":
            raise ValueError(
                "this bundle's synthesizers read token sequences (built before the slot synthesizer); "
                "rebuild it with `python -m neurips26.methods.sad.checkpoints`"
            )
        model: torch.nn.Module = _synthesizer(bundle["spec"])
        state = bundle[key]
    else:
        model = Decomposer(d_model=d, ff=2 * d)
        if key == "sl_base":
            state = bundle[key]
        else:
            name = key.removeprefix("finetuned/")
            if name not in bundle["finetuned"]:
                raise KeyError(f"bundle has no {name!r}; it has {sorted(bundle['finetuned'])}")
            state = bundle["finetuned"][name]
    model.load_state_dict({k: v.float() for k, v in state.items()})
    return model.eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(WEIGHTS_DIR))
    parser.add_argument("--size", choices=sorted(SIZES), default="default")
    parser.add_argument(
        "--reuse",
        default=None,
        help="an existing bundle whose synthesizer-independent models (no-decomposition synthesizer, SL "
        "decomposer, SL fine-tunes) are kept when their training settings are unchanged",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    spec = SIZES[args.size]
    reuse = reusable(load_bundle(args.reuse), spec) if args.reuse else None
    if reuse is not None:
        print(f"reusing {sorted(reuse)} from {args.reuse}")
    bundle = build_bundle(spec, reuse=reuse)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"sad_{args.size}.pt"
    tmp = path.with_suffix(".tmp")
    torch.save(bundle, tmp)
    tmp.replace(path)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
