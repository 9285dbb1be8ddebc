"""Baselines: Polly and GCC autopar (the real compilers, run here), and a PragFormer-like token
classifier (re-implemented: PragFormer is a fine-tuned transformer we cannot download).

The static-only GNN (Graph2Par-like, re-implemented) is :class:`~neurips26.methods.stparopt.model.StaticGNN`;
the dynamic-only and concat-fusion ablations live in ``model.py`` too.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

from neurips26.methods.stparopt.profiler import cache_dir

_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+\.?\d*f?|\+=|-=|\+\+|--|<=|>=|==|!=|&&|\|\||->|[^\s\w]")
N_BUCKETS = 1024
MAX_TOKENS = 96


def _cached(kind: str, text: str, compute):
    path = cache_dir() / f"{kind}_{hashlib.sha256(text.encode()).hexdigest()[:24]}.json"
    if path.exists():
        return json.loads(path.read_text())
    value = compute()
    path.write_text(json.dumps(value))
    return value


def _batch_file(sources: list[str]) -> tuple[str, list[int]]:
    """Concatenate single-function sources; returns the text and each source's first line (1-based)."""
    text, starts, line = "", [], 1
    for source in sources:
        starts.append(line)
        text += source if source.endswith("\n") else source + "\n"
        line += text.count("\n") - (line - 1)
    return text, starts


def gcc_autopar(sources: list[str], loop_lines: list[int]) -> tuple[list[int], float]:
    """GCC's auto-paralleliser: ``gcc -O2 -ftree-parallelize-loops=4 -fopt-info-loop``; a loop is
    parallel when gcc reports "parallelizing ... loop" at its line. ``loop_lines[k]`` is the line of
    source k's loop within source k. Returns (verdicts, seconds of gcc time)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise RuntimeError("gcc is missing: the GCC autopar baseline is unavailable")
    text, starts = _batch_file(sources)

    def compute():
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "loops.c"
            path.write_text(text)
            begin = time.perf_counter()
            done = subprocess.run(
                [
                    gcc,
                    "-O2",
                    "-ftree-parallelize-loops=4",
                    "-fopt-info-loop",
                    "-c",
                    str(path),
                    "-o",
                    str(Path(tmp) / "o.o"),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            seconds = time.perf_counter() - begin
        lines = sorted(
            {
                int(m.group(1))
                for m in re.finditer(r"loops\.c:(\d+):\d+: optimized: parallelizing", done.stderr)
            }
        )
        return {"lines": lines, "seconds": seconds, "rc": done.returncode}

    result = _cached("gccpar", text, compute)
    if result["rc"] != 0:
        raise RuntimeError("gcc could not compile the baseline batch")
    found = set(result["lines"])
    return [int(starts[k] + loop_lines[k] - 1 in found) for k in range(len(sources))], result["seconds"]


def polly(sources: list[str], functions: list[str]) -> tuple[list[int], float]:
    """Polly (LLVM 14): clang-14 -> ``opt -polly-canonicalize`` -> ``opt -polly-ast
    -polly-ast-detect-parallel -analyze``; a single-loop function is parallel when its SCoP's loop is
    ``#pragma known-parallel``; no SCoP (irregular access, pointer chasing) means not parallel.
    Returns (verdicts, seconds of clang + opt time)."""
    clang, opt = (
        shutil.which("clang-14") or shutil.which("clang"),
        shutil.which("opt-14") or shutil.which("opt"),
    )
    if clang is None or opt is None:
        raise RuntimeError(
            "clang-14/opt-14 are missing: the Polly baseline is unavailable "
            "(apt-get install clang-14 llvm-14)"
        )
    text, _ = _batch_file(sources)

    def compute():
        with tempfile.TemporaryDirectory() as tmp:
            c, ll, canon = Path(tmp) / "loops.c", Path(tmp) / "loops.ll", Path(tmp) / "canon.ll"
            c.write_text(text)
            begin = time.perf_counter()
            steps = [
                [clang, "-O1", "-Xclang", "-disable-llvm-passes", "-S", "-emit-llvm", str(c), "-o", str(ll)],
                [opt, "-S", "-polly-canonicalize", str(ll), "-o", str(canon)],
                [
                    opt,
                    "-enable-new-pm=0",
                    "-polly-process-unprofitable",
                    "-polly-ast",
                    "-polly-ast-detect-parallel",
                    "-analyze",
                    str(canon),
                ],
            ]
            out = ""
            for step in steps:
                done = subprocess.run(step, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    return {"error": done.stderr[-400:], "seconds": 0.0}
                out = done.stdout
            seconds = time.perf_counter() - begin
        parallel: dict[str, bool] = {}
        for block in out.split(":: isl ast :: ")[1:]:
            name = block.split(" ::", 1)[0].strip()
            parallel[name] = parallel.get(name, False) or "known-parallel" in block
        return {"parallel": parallel, "seconds": seconds}

    result = _cached("polly", text, compute)
    if "error" in result:
        raise RuntimeError(f"Polly failed: {result['error']}")
    return [int(result["parallel"].get(f, False)) for f in functions], result["seconds"]


def tokenize(text: str) -> torch.Tensor:
    """Hashed lexical tokens of a loop's text, (MAX_TOKENS,) with 0 as padding."""
    ids = [
        1 + int(hashlib.md5(t.encode()).hexdigest()[:6], 16) % (N_BUCKETS - 1) for t in _TOKEN.findall(text)
    ]
    ids = ids[:MAX_TOKENS] + [0] * max(0, MAX_TOKENS - len(ids))
    return torch.tensor(ids, dtype=torch.long)


class TokenClassifier(nn.Module):
    """PragFormer-like (re-implemented, small): token embeddings + positions -> one transformer encoder
    layer -> masked mean pool -> 2 logits. Sees the loop's source text only."""

    def __init__(self, hidden: int = 48, heads: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(N_BUCKETS, hidden, padding_idx=0)
        self.position = nn.Parameter(torch.randn(MAX_TOKENS, hidden) * 0.02)
        self.encoder = nn.TransformerEncoderLayer(hidden, heads, 2 * hidden, dropout=0.0, batch_first=True)
        self.head = nn.Linear(hidden, 2)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        mask = tokens == 0
        h = self.encoder(self.embed(tokens) + self.position, src_key_padding_mask=mask)
        keep = (~mask).float()[..., None]
        return self.head((h * keep).sum(1) / keep.sum(1).clamp(min=1))


def train_token_classifier(
    texts: list[str],
    labels: torch.Tensor,
    *,
    hidden: int,
    heads: int,
    epochs: int,
    lr: float,
    batch_size: int,
    seed: int,
) -> TokenClassifier:
    torch.manual_seed(seed)
    model = TokenClassifier(hidden, heads)
    tokens = torch.stack([tokenize(t) for t in texts])
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(texts), generator=generator)
        for start in range(0, len(texts), batch_size):
            chunk = order[start : start + batch_size]
            loss = nn.functional.cross_entropy(model(tokens[chunk]), labels[chunk])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.eval()
    return model
