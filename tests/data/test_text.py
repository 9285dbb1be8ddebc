from __future__ import annotations

from pathlib import Path

import pytest

from neurips26.data.text import load_stdlib_corpus, split_of, stdlib_root


def _tree(root: Path, n: int = 40) -> Path:
    for i in range(n):
        (root / f"pkg{i % 3}").mkdir(exist_ok=True)
        (root / f"pkg{i % 3}" / f"mod{i}.py").write_text(f'"""Module {i}."""\nx = {i}\n')
    (root / "test").mkdir()
    (root / "test" / "test_skip.py").write_text("skipped = True\n")
    (root / "empty.py").write_text("   \n")
    return root


def test_split_is_a_pure_function_of_the_path():
    assert split_of("json/decoder.py") == split_of("json/decoder.py")
    shares = [split_of(f"m{i}.py") == "heldout" for i in range(4000)]
    assert 0.08 < sum(shares) / len(shares) < 0.12


def test_splits_partition_the_files_and_skip_tests_and_empty(tmp_path):
    root = _tree(tmp_path)
    train = load_stdlib_corpus("train", root=root, heldout_fraction=0.3)
    held = load_stdlib_corpus("heldout", root=root, heldout_fraction=0.3)
    names = {f.path for f in train} | {f.path for f in held}
    assert len(train) + len(held) == 40 == len(names)
    assert not any(p.startswith("test/") or p == "empty.py" for p in names)
    assert [f.path for f in train] == sorted(f.path for f in train)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"split": "valid"}, "split must be one of"), ({"heldout_fraction": 1.5}, "heldout_fraction")],
)
def test_bad_arguments_name_themselves(tmp_path, kwargs, match):
    root = _tree(tmp_path)
    with pytest.raises(ValueError, match=match):
        load_stdlib_corpus(root=root, **kwargs)


def test_missing_root_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a directory"):
        load_stdlib_corpus(root=tmp_path / "nope")


def test_the_machine_stdlib_is_found():
    assert (stdlib_root() / "json" / "decoder.py").is_file()
