"""Tier 3: WordNet multiple-choice tasks, cached-prefix choice scoring, the committed real-LM recording
(shape, ids, hash; regenerated identically when the weights are here) and its replay."""

from __future__ import annotations

import numpy as np
import pytest

from neurips26.methods.poes.baselines import FullEvaluation, RandomMinibatch
from neurips26.methods.poes.choice_scoring import choice_log_probs_from_ids
from neurips26.methods.poes.real_recording import (
    FAMILIES,
    OFF_TASK_INSTRUCTIONS,
    RECORDING_PATH,
    RecordedTask,
    candidate_prompts,
    item_contents,
    load_recording,
)
from neurips26.methods.poes.replay import dataset_hash
from neurips26.methods.poes.tier2 import optimize
from neurips26.methods.poes.tier3 import FamilyMutator, RecordedScorer, Tier3Settings, split_items
from neurips26.methods.poes.wordnet_glosses import WORDNET_DIR
from neurips26.methods.poes.wordnet_tasks import CANDIDATES, CATEGORY_CHOICES, TASK_NAMES, build_task

needs_wordnet = pytest.mark.skipif(
    not (WORDNET_DIR / "data.noun").is_file(), reason="wordnet-base not installed"
)


@needs_wordnet
@pytest.mark.parametrize("name", TASK_NAMES)
def test_tasks_have_four_distinct_choices_one_answer_and_disjoint_demos(name: str) -> None:
    task = build_task(name, 60, n_demos=12)
    ids = [i.id for i in task.items + task.demos]
    assert len(set(ids)) == len(ids) == 72  # demonstrations never come from the evaluated items
    for item in task.items:
        assert len(set(item.choices)) == 4 and 0 <= item.answer < 4
        assert item.subject not in item.choices
    if name == "category":
        assert {i.choices for i in task.items} == {tuple(CATEGORY_CHOICES.values())}
    answers = np.bincount([i.answer for i in task.items], minlength=4)
    assert answers.min() >= 5  # the correct position is spread over the four choices
    with pytest.raises(ValueError, match="name"):
        build_task("synonym", 10)
    with pytest.raises(ValueError, match="n_items"):
        build_task(name, 10**6)


@needs_wordnet
def test_hypernym_and_antonym_items_are_wordnet_facts() -> None:
    hypernyms = {i.subject: i.choices[i.answer] for i in CANDIDATES["hypernym"](0, WORDNET_DIR)}
    antonyms = {i.subject: i.choices[i.answer] for i in CANDIDATES["antonym"](0, WORDNET_DIR)}
    assert hypernyms["dog"] == "canine" and antonyms["hot"] == "cold"


def test_cached_prefix_scoring_equals_one_full_forward_per_item() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from neurips26.testing.stock_models import tiny_stock_model

    model = tiny_stock_model("gemma3")  # sliding layers (window 16): prefix + item spans the window
    rng = np.random.default_rng(0)
    prefix = [2, *rng.integers(3, 256, 12).tolist()]
    items = [rng.integers(3, 256, int(n)).tolist() for n in rng.integers(1, 9, 7)]
    choices = rng.integers(3, 256, (7, 4))
    cached = choice_log_probs_from_ids(model, prefix, items, choices, pad_id=0, batch_size=3)
    with torch.inference_mode():
        for row, item in enumerate(items):
            logits = model(input_ids=torch.tensor([prefix + item])).logits[0, -1]
            expected = torch.log_softmax(logits.float(), -1)[torch.as_tensor(choices[row])].numpy()
            np.testing.assert_allclose(cached[row], expected, atol=1e-5)
    with pytest.raises(ValueError, match="prefix_ids"):
        choice_log_probs_from_ids(model, [], items, choices, pad_id=0)
    with pytest.raises(ValueError, match="choice_ids"):
        choice_log_probs_from_ids(model, prefix, items, choices[:3], pad_id=0)


def test_family_mutator_proposes_each_prompt_once_and_keeps_the_family() -> None:
    families = tuple(f for f in FAMILIES for _ in range(4))
    rng = np.random.default_rng(0)
    mutator = FamilyMutator(families, same_family=1.0)
    starts = [mutator.initial(rng) for _ in range(4)]
    assert [families[s] for s in starts] == list(FAMILIES)  # one seed prompt per family
    children = [mutator.mutate(starts[0], rng) for _ in range(3)]
    assert {families[c] for c in children} == {families[starts[0]]}
    rest = [mutator.mutate(starts[1], rng) for _ in range(9)]
    assert sorted(starts + children + rest) == list(range(16))  # nothing proposed twice while any is new
    other = FamilyMutator(families, same_family=0.0)
    parent = other.initial(rng)
    assert all(families[other.mutate(parent, rng)] != families[parent] for _ in range(6))
    with pytest.raises(ValueError, match="same_family"):
        Tier3Settings(same_family=1.5)


def synthetic_recording(seed: int = 0, n_prompts: int = 16, n_items: int = 200) -> RecordedTask:
    """Prompts of rising skill answering items of varied difficulty (a stand-in recording)."""
    rng = np.random.default_rng(seed)
    skill = np.linspace(-1, 1.5, n_prompts)[:, None] - rng.normal(size=n_items)[None]
    right = rng.random((n_prompts, n_items)) < 1 / (1 + np.exp(-2 * skill))
    answers = rng.integers(0, 4, n_items)
    log_probs = rng.normal(size=(n_prompts, n_items, 4)) - 5.0
    rows, cols = np.nonzero(right)
    log_probs[rows, cols, answers[cols]] = 0.0
    log_probs[~right, answers[None].repeat(n_prompts, 0)[~right]] = -20.0
    return RecordedTask(
        "synthetic",
        log_probs.astype(np.float32),
        answers,
        tuple(f"i{j}" for j in range(n_items)),
        tuple(f"p{j}" for j in range(n_prompts)),
        tuple(f for f in FAMILIES for _ in range(n_prompts // 4)),
        rng.normal(size=(n_items, 16)).astype(np.float32),
        "",
    )


def test_replay_of_a_recording_answers_with_its_correctness() -> None:
    recorded = synthetic_recording()
    assert recorded.correct.shape == (16, 200)
    pool, test = split_items(200, 100, seed=0)
    assert not set(pool) & set(test) and len(pool) + len(test) == 200
    scorer = RecordedScorer(recorded, pool, test)
    np.testing.assert_array_equal(scorer.scores(3, "test"), recorded.correct[3, test])
    results = {}
    for name, factory in {"full": lambda p: FullEvaluation(), "random": lambda p: RandomMinibatch()}.items():
        r = optimize(factory, scorer, FamilyMutator(recorded.families, 0.7), 10, 0, rounds=2)
        assert 0.0 <= r["test_accuracy"] <= r["best_proposed_accuracy"] <= 1.0
        results[name] = r
    assert results["full"]["calls"] == 12 * 100 and results["random"]["calls"] <= 3 * 4 * 10
    with pytest.raises(ValueError, match="n_pool"):
        split_items(10, 10, seed=0)


# ---- the committed recording ----------------------------------------------------------------------------
def test_committed_recording_matches_the_wordnet_tasks_and_the_prompt_pool() -> None:
    if not RECORDING_PATH.is_file():
        pytest.fail(f"{RECORDING_PATH} is missing: it is committed with the package")
    tasks, meta = load_recording()
    assert list(tasks) == list(TASK_NAMES) and meta["model"] == "gemma3-270m"
    for name, recorded in tasks.items():
        n_prompts, n_items = len(recorded.prompts), len(recorded.item_ids)
        assert recorded.log_probs.shape == (n_prompts, n_items, 4) and n_items == 200 and n_prompts == 16
        assert recorded.embeddings.shape[0] == n_items and np.isfinite(recorded.log_probs).all()
        assert len(set(recorded.item_ids)) == n_items
        assert recorded.families == tuple(f for f in FAMILIES for _ in range(4))
        assert recorded.prompts[12:] == tuple(f"{o}\n\n" if o else "" for o in OFF_TASK_INSTRUCTIONS)
        if not (WORDNET_DIR / "data.noun").is_file():
            continue
        # the recorded items are WordNet's candidates, in their order, with the same text and answers
        by_id = {c.id: c for c in CANDIDATES[name](0, WORDNET_DIR)}
        items = tuple(by_id[i] for i in recorded.item_ids)
        order = list(by_id)
        positions = [order.index(i) for i in recorded.item_ids]
        assert positions == sorted(positions)
        np.testing.assert_array_equal(recorded.answers, [i.answer for i in items])
        assert recorded.dataset_hash == dataset_hash(list(recorded.item_ids), item_contents(items))


def _weights_present() -> bool:
    from neurips26.zoo.real_lm import MANIFEST, real_model_dir

    return (real_model_dir("gemma3-270m") / MANIFEST).is_file()


@needs_wordnet
@pytest.mark.skipif(
    not _weights_present(), reason="gemma3-270m is not converted here (neurips26 zoo fetch-real)"
)
def test_recording_is_regenerated_identically_with_the_weights() -> None:
    # a slice (one prompt per task, the first batch of 50 items: the recording's own batches) rescored
    from neurips26.methods.poes.choice_scoring import choice_log_probs, choice_token_ids
    from neurips26.zoo.real_lm import load_real

    tasks, _ = load_recording()
    model, tokenizer = load_real("gemma3-270m", verify=False)
    for number, (name, recorded) in enumerate(tasks.items()):
        task = build_task(
            name, 200, choice_filter=lambda i: choice_token_ids(tokenizer, i.choices) is not None
        )
        assert tuple(i.id for i in task.items) == recorded.item_ids
        assert tuple(p.text for p in candidate_prompts(task)) == recorded.prompts
        prompt = 4 * number + 1  # an instruction, a one-shot and a three-shot prompt across the tasks
        again = choice_log_probs(model, tokenizer, name, recorded.prompts[prompt], task.items[:50])
        np.testing.assert_array_equal(again, recorded.log_probs[prompt, :50])
