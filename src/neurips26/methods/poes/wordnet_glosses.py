"""WordNet noun glosses labelled by lexicographer file (noun.animal, noun.food, ...), from Debian's
``wordnet-base`` package (``apt-get install wordnet-base``; files under /usr/share/wordnet)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

WORDNET_DIR = Path("/usr/share/wordnet")
# WordNet 3.0 lexicographer file numbers of the noun files (lexnames(5WN))
NOUN_LEXFILES = {
    3: "noun.Tops", 4: "noun.act", 5: "noun.animal", 6: "noun.artifact", 7: "noun.attribute", 8: "noun.body",
    9: "noun.cognition", 10: "noun.communication", 11: "noun.event", 12: "noun.feeling", 13: "noun.food",
    14: "noun.group", 15: "noun.location", 16: "noun.motive", 17: "noun.object", 18: "noun.person",
    19: "noun.phenomenon", 20: "noun.plant", 21: "noun.possession", 22: "noun.process", 23: "noun.quantity",
    24: "noun.relation", 25: "noun.shape", 26: "noun.state", 27: "noun.substance", 28: "noun.time",
}  # fmt: skip


@dataclass(frozen=True)
class Gloss:
    """One noun synset: its offset id, gloss text (examples dropped), class label and lemma words."""

    id: str
    text: str
    label: str
    lemmas: tuple[str, ...]


def synset_records(pos: str, wordnet_dir: Path | str = WORDNET_DIR) -> Iterator[tuple[list[str], str]]:
    """The head fields and the gloss (usage examples dropped) of every synset line of ``data.<pos>``;
    ``FileNotFoundError`` naming the package when it is absent."""
    path = Path(wordnet_dir) / f"data.{pos}"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: install WordNet with `apt-get install wordnet-base`")
    with path.open(encoding="latin-1") as handle:
        for line in handle:
            if line.startswith("  "):  # licence header
                continue
            head, _, gloss = line.partition(" | ")
            yield head.split(), gloss.split('; "')[0].strip()


def read_noun_glosses(wordnet_dir: Path | str = WORDNET_DIR) -> list[Gloss]:
    """Every noun synset of ``data.noun``; ``FileNotFoundError`` naming the package when it is absent."""
    glosses = []
    for fields, text in synset_records("noun", wordnet_dir):
        lexfile, n_words = int(fields[1]), int(fields[3], 16)
        lemmas = tuple(fields[4 + 2 * j].replace("_", " ").lower() for j in range(n_words))
        glosses.append(Gloss(fields[0], text, NOUN_LEXFILES[lexfile], lemmas))
    return glosses


def sample_glosses(
    classes: tuple[str, ...], per_class: int, seed: int, wordnet_dir: Path | str = WORDNET_DIR
) -> list[Gloss]:
    """``per_class`` random glosses (at least 4 words long) of each class, shuffled."""
    unknown = set(classes) - set(NOUN_LEXFILES.values())
    if unknown:
        raise ValueError(
            f"classes {sorted(unknown)} are not noun lexicographer files; choose from NOUN_LEXFILES"
        )
    rng = np.random.default_rng(seed)
    by_class: dict[str, list[Gloss]] = {c: [] for c in classes}
    for g in read_noun_glosses(wordnet_dir):
        if g.label in by_class and len(g.text.split()) >= 4:
            by_class[g.label].append(g)
    out: list[Gloss] = []
    for c in classes:
        if len(by_class[c]) < per_class:
            raise ValueError(f"per_class={per_class} exceeds the {len(by_class[c])} glosses of {c}")
        picks = rng.choice(len(by_class[c]), per_class, replace=False)
        out.extend(by_class[c][i] for i in picks)
    return [out[i] for i in rng.permutation(len(out))]
