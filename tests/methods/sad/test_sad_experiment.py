"""SAD on the committed checkpoints: the reward discriminates subgoals, search and experiment run."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from neurips26.bench.setup import build_context
from neurips26.methods.sad import dsl
from neurips26.methods.sad import tokens as tok
from neurips26.methods.sad.checkpoints import SIZES, WEIGHTS_DIR, load_bundle, model_from, reusable
from neurips26.methods.sad.executor import CANDIDATES
from neurips26.methods.sad.experiment import EXPERIMENT, SYSTEMS, SADExperimentConfig, run
from neurips26.methods.sad.sampler import sample_tasks, step_records
from neurips26.methods.sad.search import _gt_if_in_beam, enumerative_search, synthesize
from neurips26.methods.sad.training import encode_records, subgoal_reward

torch.set_num_threads(1)
BUNDLE = WEIGHTS_DIR / "sad_default.pt"
needs_bundle = pytest.mark.skipif(not BUNDLE.exists(), reason="no committed SAD checkpoint bundle")


@pytest.fixture(scope="module")
def bundle():
    return load_bundle(BUNDLE)


@pytest.fixture(scope="module")
def held_out():
    tasks = sample_tasks(np.random.default_rng(777), 60, (1, 2, 3, 4))
    return encode_records(step_records(tasks))


def perturbed(seq: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Replace every integer token of the GT subgoal by a random integer token (same structure)."""
    out = seq.clone()
    ints = out >= tok.INT0
    out[ints] = torch.randint(tok.INT0, tok.VOCAB_SIZE, (int(ints.sum()),), generator=generator)
    return out


@needs_bundle
def test_trained_reward_ranks_gt_subgoals_above_perturbed_ones(bundle, held_out):
    synth = model_from(bundle, "synthesizer")
    gen = torch.Generator().manual_seed(0)
    gt = subgoal_reward(synth, held_out.context, held_out.subgoal_seq, held_out.statement)
    rand = subgoal_reward(synth, held_out.context, perturbed(held_out.subgoal_seq, gen), held_out.statement)
    assert float(gt.mean()) > float(rand.mean()) + 0.5
    assert float((gt > rand).float().mean()) > 0.7


@needs_bundle
def test_reward_idea_off_subgoal_blind_solver_cannot_rank(bundle, held_out):
    """Idea off: a solver that ignores the subgoal gives every subgoal the same reward (no signal)."""
    synth = model_from(bundle, "synthesizer")

    class SubgoalBlind:
        def score(self, context, subgoal, statement):
            return synth.score(context, torch.full_like(subgoal, tok.EOS), statement)

    gen = torch.Generator().manual_seed(0)
    blind = SubgoalBlind()
    gt = subgoal_reward(blind, held_out.context, held_out.subgoal_seq, held_out.statement)
    rand = subgoal_reward(blind, held_out.context, perturbed(held_out.subgoal_seq, gen), held_out.statement)
    torch.testing.assert_close(gt, rand)


@needs_bundle
def test_search_modes_and_enumerative_budget(bundle):
    tasks = sample_tasks(np.random.default_rng(3), 8, (1, 2))
    synth = model_from(bundle, "synthesizer")
    dec = model_from(bundle, "finetuned/sad/0")
    oracle = synthesize(tasks, synth, None, "oracle", 2, 2, 3)
    own = synthesize(tasks, synth, dec, "decompose", 2, 2, 3)
    assert (own.executions <= (np.array([len(t.program) for t in tasks]) + 1) * 2 * 2 * 3).all()
    assert oracle.solved.mean() > 0.3  # length-1/2 tasks with GT subgoals are mostly solved
    enum = enumerative_search(tasks, 12)
    assert (enum.executions <= 12).all()
    big = enumerative_search(tasks, 100_000)
    assert big.solved.all()  # exhaustive BFS finds every length-1/2 program
    with pytest.raises(ValueError, match="mode must be one of"):
        synthesize(tasks, synth, dec, "beam")


@needs_bundle
def test_run_returns_finite_metrics_for_every_system():
    config = SADExperimentConfig(num_tasks=3)
    smoke = EXPERIMENT.profiles["smoke"]
    context = build_context(EXPERIMENT, config, smoke, 0)
    for name in SYSTEMS:
        system = EXPERIMENT.systems[name](config)
        metrics = run(system, config, context, smoke, 0, None)
        assert metrics.pop("details")["exedec"].startswith("n/a: exedec_dir is empty"), name
        assert {"task_acc_id", "task_acc_len"} <= set(metrics), name
        assert all(np.isfinite(v) for v in metrics.values()), (name, metrics)
        if SYSTEMS[name].mode == "decompose":
            assert {"gt_mismatch_len", "gt_in_beam_len", "synth_acc_len", "beyond_oracle_len"} <= set(metrics)
            assert metrics["gt_in_beam_id"] >= 1 - metrics["gt_mismatch_id"] - 1e-9  # beam holds the greedy


def _exedec_record(task) -> dict:
    """One of our tasks written as an ExeDec JSONL record (inputs, outputs, program text)."""
    names = task.program.inputs
    return {
        "inputs": [
            " | ".join(f"{n} = {dsl.format_value(v)}" for n, v in zip(names, ins, strict=True))
            for ins in task.inputs
        ],
        "outputs": [dsl.format_value(o) for o in task.outputs],
        "program": dsl.format_program(task.program),
    }


@needs_bundle
def test_exedec_splits_run_from_the_configured_folder_or_say_why_not(tmp_path, monkeypatch):
    """The ExeDec folder is a config field (in the hash); an empty, missing or altered folder makes those
    splits n/a with the reason in the cell's details, and the files named by the sha256 are evaluated."""
    import hashlib

    from neurips26.core.config import config_hash
    from neurips26.methods.sad import experiment

    assert config_hash(SADExperimentConfig()) != config_hash(SADExperimentConfig(exedec_dir=str(tmp_path)))
    system = EXPERIMENT.systems["sad"](SADExperimentConfig())
    profile = EXPERIMENT.profiles["smoke"]

    def details_and_splits(folder: str) -> tuple[str, set[str]]:
        config = SADExperimentConfig(num_tasks=2, exedec_dir=folder)
        metrics = run(system, config, build_context(EXPERIMENT, config, profile, 0), profile, 0, None)
        return metrics.pop("details")["exedec"], {k for k in metrics if k.startswith("task_acc_")}

    note, splits = details_and_splits(str(tmp_path))
    assert (
        note == f"n/a: ExeDec files not found at {tmp_path} (missing NONE.jsonl, LENGTH_GENERALIZATION.jsonl)"
    )
    assert splits == {"task_acc_id", "task_acc_len"}
    rng = np.random.default_rng(0)
    for name, lengths in (("NONE", (1, 2)), ("LENGTH_GENERALIZATION", (3,))):
        lines = [json.dumps(_exedec_record(t)) for t in sample_tasks(rng, 4, lengths)]
        (tmp_path / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    note, splits = details_and_splits(str(tmp_path))
    assert note.startswith(f"n/a: {tmp_path / 'NONE.jsonl'} is not ExeDec's published file (sha256 ")
    assert "task_acc_exedec_id" not in splits
    digests = {
        n: hashlib.sha256((tmp_path / f"{n}.jsonl").read_bytes()).hexdigest()
        for n in experiment.EXEDEC_SHA256
    }
    monkeypatch.setattr(experiment, "EXEDEC_SHA256", digests)  # our stand-in files play the published ones
    note, splits = details_and_splits(str(tmp_path))
    assert note == f"evaluated: 2 tasks per seed from each of NONE, LENGTH_GENERALIZATION at {tmp_path}"
    assert splits == {"task_acc_id", "task_acc_len", "task_acc_exedec_id", "task_acc_exedec_len"}
    with pytest.raises(TypeError, match="exedec_dir"):
        SADExperimentConfig(exedec_dir=None)


@needs_bundle
def test_kbest_uses_the_gt_subgoal_only_when_the_beam_holds_it(bundle):
    tasks = sample_tasks(np.random.default_rng(4), 6, (2, 3))
    synth = model_from(bundle, "synthesizer")

    class JunkDecomposer:  # a beam that never holds the GT subgoal: k-best decoding is plain decoding
        def beam_search(self, context, beam_size):
            junk = torch.full((context.shape[0], beam_size, 24), tok.PAD, dtype=torch.long)
            junk[:, :, 0] = tok.INT0
            junk[:, :, 1] = tok.EOS
            return junk, torch.zeros(context.shape[0], beam_size)

    plain = synthesize(tasks, synth, JunkDecomposer(), "decompose", 2, 2, 3)
    kbest = synthesize(tasks, synth, JunkDecomposer(), "kbest", 2, 2, 3)
    assert np.array_equal(plain.solved, kbest.solved)
    assert np.array_equal(plain.executions, kbest.executions)
    # a beam holding the GT subgoal in its second slot: that row is replaced by the GT, best score
    gt = tok.subgoal_tokens(tuple(row[len(tasks[0].program.inputs)] for row in tasks[0].trace()))
    beams = torch.full((2, 2, 24), tok.PAD, dtype=torch.long)
    beams[:, :, 0], beams[:, :, 1] = tok.INT0, tok.EOS
    beams[0, 1, : len(gt)] = torch.as_tensor(gt)
    scores = torch.tensor([[-1.0, -3.0], [-2.0, -4.0]])
    out, out_scores = _gt_if_in_beam(beams, scores, [tasks[0], tasks[1]], step=0)
    assert torch.equal(out[0, 0], beams[0, 1]) and torch.equal(out[0, 1], beams[0, 1])
    assert out_scores[0].tolist() == [-1.0, -1.0]
    assert torch.equal(out[1], beams[1]) and out_scores[1].tolist() == [-2.0, -4.0]


def test_experiment_config_rejects_bad_values():
    with pytest.raises(ValueError, match="num_tasks"):
        SADExperimentConfig(num_tasks=0)
    with pytest.raises(ValueError, match="enumerative_factor"):
        SADExperimentConfig(enumerative_factor=0)
    config = SADExperimentConfig()
    assert dataclasses.asdict(config)["method"]["entropy_coef"] == 0.001


def test_missing_bundle_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"python -m neurips26\.methods\.sad\.checkpoints"):
        load_bundle(tmp_path / "nope.pt")


def test_candidate_space_size_is_what_the_readme_says():
    assert len(CANDIDATES) == 1070


@needs_bundle
def test_reuse_keeps_only_models_that_do_not_read_the_synthesizer(bundle):
    """``--reuse``: the synthesizers, the SL decomposer and its SL fine-tune are kept when their own
    settings match; SAD and RL-only (trained against the synthesizer) never are."""
    spec = dataclasses.replace(
        SIZES["default"], **{k: bundle["spec"][k] for k in ("num_train_tasks", "d_model")}
    )
    kept = reusable(bundle, spec)
    assert {"synthesizer", "sl_base", "no_decomposition", "sl/0"} <= set(kept)
    assert not any(k.startswith(("sad/", "rl_only/")) for k in kept)
    assert "sl_base" not in reusable(bundle, dataclasses.replace(spec, decomposer_steps=7))
    assert "no_decomposition" not in reusable(bundle, dataclasses.replace(spec, nodec_steps=7))
    changed_synth = reusable(bundle, dataclasses.replace(spec, synth_steps=7))
    assert "synthesizer" not in changed_synth and "no_decomposition" in changed_synth
    wider = reusable(bundle, dataclasses.replace(spec, synth_d_model=96))
    assert "synthesizer" not in wider and "no_decomposition" not in wider and "sl_base" in wider


def test_accuracy_analysis_reads_every_system_and_split(tmp_path):
    """The README's accuracy table is the cells' per-seed means (GT match = 1 - mismatch), and the
    figure is written."""
    from neurips26.methods.sad.analysis import accuracy_analysis

    def cell(system, seed, **metrics):
        return {"system": system, "seed": seed, "status": "ok", "metrics": metrics}

    result = {
        "run_info": {"ours": "sad", "profile": "default"},
        "systems": {"sad": {}, "gt_oracle": {}},
        "cells": [
            cell("sad", 0, task_acc_id=0.4, task_acc_len=0.1, gt_mismatch_id=0.8, synth_acc_id=0.2),
            cell("sad", 1, task_acc_id=0.6, task_acc_len=0.3, gt_mismatch_id=0.6, synth_acc_id=0.4),
            cell("gt_oracle", 0, task_acc_id=0.9, task_acc_len=0.5),
            cell("gt_oracle", 1, task_acc_id=0.7, task_acc_len=float("nan")),
            {"system": "gt_oracle", "seed": 2, "status": "error", "metrics": {"task_acc_id": 0.0}},
        ],
    }
    analysis = accuracy_analysis(result)
    lines = [line for line in analysis.markdown.splitlines() if line.startswith("| ")]
    rows = {line.split("|")[1].strip(): line for line in lines}
    assert rows["**sad**"].split("|")[2].strip().startswith("0.50 [")  # mean of 0.4 and 0.6
    assert "0.30 [" in rows["**sad**"].split("|")[4]  # GT match = 1 - mean mismatch 0.7
    oracle = rows["gt_oracle"].split("|")
    assert oracle[2].strip().startswith("0.80 [")  # the failed cell is not counted
    assert oracle[3].strip() == "0.50 [0.50, 0.50]"  # the NaN seed is dropped: one value left
    assert oracle[4].strip() == "—" and "ExeDec" not in analysis.markdown  # split absent from the cells
    analysis.figure(tmp_path / "accuracy.png")
    assert (tmp_path / "accuracy.png").stat().st_size > 1000
    why = "n/a: ExeDec files not found at /nowhere (missing NONE.jsonl)"
    result["cells"][0]["details"] = {"exedec": why}
    markdown = accuracy_analysis(result).markdown
    assert f"ExeDec's test sets: {why}." in markdown and "ExeDec NONE" not in markdown  # said, no column
