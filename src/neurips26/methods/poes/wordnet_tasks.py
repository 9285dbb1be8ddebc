"""Multiple-choice tasks built from WordNet 3.0 (Debian ``wordnet-base``; files under /usr/share/wordnet).

Three tasks, each item a question with four fixed choices, one correct:

* ``category``: which of four lexicographer categories (animal, plant, food, body part) a noun gloss
  describes (the same four choices for every item);
* ``hypernym``: the direct hypernym of a familiar noun (``dog`` -> ``canine``), against three hypernyms
  of other items that are not ancestors of this noun;
* ``antonym``: the antonym of a familiar adjective (``hot`` -> ``cold``), against three antonyms of other
  items.

A word is *familiar* when its first WordNet sense is the synset used and that sense is tagged in the
SemCor counts (``index.*`` tagsense_cnt > 0). Candidate items are listed in a seeded order; a language
model that scores one token per choice keeps those whose choices are single tokens
(``choice_filter``), and the first ``n_items`` left form the task, the next ones its demonstration bank.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from neurips26.methods.poes.wordnet_glosses import WORDNET_DIR, read_noun_glosses, synset_records

TASK_NAMES = ("category", "hypernym", "antonym")
CATEGORY_CHOICES = {"noun.animal": "animal", "noun.plant": "plant", "noun.food": "food", "noun.body": "body"}
N_CHOICES = 4


@dataclass(frozen=True)
class ChoiceItem:
    """One multiple-choice item: a WordNet id, the subject (gloss or word), four choices, the answer."""

    id: str
    subject: str
    choices: tuple[str, ...]
    answer: int


@dataclass(frozen=True)
class Synset:
    offset: str
    lexfile: int
    words: tuple[str, ...]
    pointers: tuple[tuple[str, str, str], ...]  # (symbol, target offset, source/target word numbers)
    gloss: str


@lru_cache(maxsize=4)  # parsed once per process: every task builder and test reads the same files
def read_synsets(pos: str, wordnet_dir: Path | str = WORDNET_DIR) -> dict[str, Synset]:
    """Every synset of ``data.<pos>`` (pos: noun or adj) by offset; words lower-cased, markers dropped."""
    synsets = {}
    for fields, gloss in synset_records(pos, wordnet_dir):
        n_words = int(fields[3], 16)
        words = tuple(fields[4 + 2 * j].split("(")[0].replace("_", " ").lower() for j in range(n_words))
        at = 4 + 2 * n_words
        n_pointers = int(fields[at])
        pointers = tuple(
            (fields[at + 1 + 4 * p], fields[at + 2 + 4 * p], fields[at + 4 + 4 * p])
            for p in range(n_pointers)
        )
        synsets[fields[0]] = Synset(fields[0], int(fields[1]), words, pointers, gloss)
    return synsets


@lru_cache(maxsize=4)
def familiar_first_senses(pos: str, wordnet_dir: Path | str = WORDNET_DIR) -> dict[str, str]:
    """Single words whose first sense is tagged in SemCor -> that sense's synset offset."""
    out = {}
    with (Path(wordnet_dir) / f"index.{pos}").open(encoding="latin-1") as handle:
        for line in handle:
            if line.startswith("  "):
                continue
            fields = line.split()
            lemma, n_pointers = fields[0], int(fields[3])
            tagged = int(fields[5 + n_pointers])
            if tagged > 0 and lemma.isalpha():
                out[lemma] = fields[6 + n_pointers]  # the first (most frequent) sense
    return out


def _ancestors(offset: str, synsets: dict[str, Synset]) -> set[str]:
    seen: set[str] = set()
    frontier = [offset]
    while frontier:
        for symbol, target, _ in synsets[frontier.pop()].pointers:
            if symbol in ("@", "@i") and target not in seen:
                seen.add(target)
                frontier.append(target)
    return seen


def _with_distractors(
    rng: np.random.Generator, subject: str, answer: str, pool: list[str], excluded: set[str]
) -> tuple[tuple[str, ...], int]:
    """Four choices: ``answer`` and three distinct words of ``pool`` outside ``excluded``, shuffled."""
    options = [w for w in pool if w != answer and w not in excluded and w != subject]
    picks = [options[i] for i in rng.choice(len(options), N_CHOICES - 1, replace=False)]
    order = rng.permutation(N_CHOICES)
    choices = [answer, *picks]
    return tuple(choices[i] for i in order), int(np.flatnonzero(order == 0)[0])


def category_candidates(seed: int, wordnet_dir: Path | str = WORDNET_DIR) -> list[ChoiceItem]:
    """Noun glosses of 4 to 12 words from the four categories (short: LM time grows with tokens),
    classes interleaved in a seeded order."""
    rng = np.random.default_rng([seed, 31])
    labels = list(CATEGORY_CHOICES)
    by_class: dict[str, list] = {c: [] for c in labels}
    for g in read_noun_glosses(wordnet_dir):
        if g.label in by_class and 4 <= len(g.text.split()) <= 12:
            by_class[g.label].append(g)
    orders = {c: rng.permutation(len(by_class[c])) for c in labels}
    choices = tuple(CATEGORY_CHOICES.values())
    out = []
    for i in range(min(len(o) for o in orders.values())):
        for answer, c in enumerate(labels):
            g = by_class[c][orders[c][i]]
            out.append(ChoiceItem(f"n{g.id}", g.text, choices, answer))
    return out


def hypernym_candidates(seed: int, wordnet_dir: Path | str = WORDNET_DIR) -> list[ChoiceItem]:
    """Familiar nouns -> the first single-word lemma of their first direct hypernym."""
    synsets = read_synsets("noun", wordnet_dir)
    pairs = []
    for word, offset in sorted(familiar_first_senses("noun", wordnet_dir).items()):
        hypernyms = [t for s, t, _ in synsets[offset].pointers if s == "@"]
        names = [w for w in synsets[hypernyms[0]].words if w.isalpha()] if hypernyms else []
        if names and names[0] != word:
            pairs.append((word, offset, names[0]))
    pool = sorted({h for _, _, h in pairs})
    rng = np.random.default_rng([seed, 32])
    out = []
    for i in rng.permutation(len(pairs)):
        word, offset, answer = pairs[i]
        excluded = {w for a in _ancestors(offset, synsets) for w in synsets[a].words}
        choices, position = _with_distractors(rng, word, answer, pool, excluded)
        out.append(ChoiceItem(f"n{offset}:{word}", word, choices, position))  # synonyms share a synset
    return out


def antonym_candidates(seed: int, wordnet_dir: Path | str = WORDNET_DIR) -> list[ChoiceItem]:
    """Familiar adjectives -> their first direct antonym (a single word)."""
    synsets = read_synsets("adj", wordnet_dir)
    familiar = familiar_first_senses("adj", wordnet_dir)
    antonyms: dict[str, list[str]] = {}
    for word, offset in sorted(familiar.items()):
        synset = synsets[offset]
        for symbol, target, numbers in synset.pointers:
            source = int(numbers[:2], 16)
            if symbol == "!" and source > 0 and synset.words[source - 1] == word:
                other = synsets[target].words[int(numbers[2:], 16) - 1]
                if other.isalpha():
                    antonyms.setdefault(word, []).append(other)
    pool = sorted({a for names in antonyms.values() for a in names})
    words = sorted(antonyms)
    rng = np.random.default_rng([seed, 33])
    out = []
    for i in rng.permutation(len(words)):
        word = words[i]
        choices, position = _with_distractors(rng, word, antonyms[word][0], pool, set(antonyms[word]))
        out.append(ChoiceItem(f"a{familiar[word]}:{word}", word, choices, position))
    return out


CANDIDATES: dict[str, Callable[[int, Path | str], list[ChoiceItem]]] = {
    "category": category_candidates,
    "hypernym": hypernym_candidates,
    "antonym": antonym_candidates,
}


@dataclass(frozen=True)
class ChoiceTask:
    """A task's evaluation items and, disjoint from them, a bank of items for demonstrations."""

    name: str
    items: tuple[ChoiceItem, ...]
    demos: tuple[ChoiceItem, ...]


def build_task(
    name: str,
    n_items: int,
    n_demos: int = 12,
    choice_filter: Callable[[ChoiceItem], bool] | None = None,
    seed: int = 0,
    wordnet_dir: Path | str = WORDNET_DIR,
) -> ChoiceTask:
    """The first ``n_items`` candidates that pass ``choice_filter`` (all when None), then ``n_demos`` more."""
    if name not in CANDIDATES:
        raise ValueError(f"name must be one of {TASK_NAMES}, got {name!r}")
    kept = [c for c in CANDIDATES[name](seed, wordnet_dir) if choice_filter is None or choice_filter(c)]
    if len(kept) < n_items + n_demos:
        raise ValueError(f"n_items + n_demos ({n_items + n_demos}) exceeds the {len(kept)} items of {name!r}")
    return ChoiceTask(name, tuple(kept[:n_items]), tuple(kept[n_items : n_items + n_demos]))
