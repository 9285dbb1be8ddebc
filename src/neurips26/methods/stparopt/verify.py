"""Checks of generated CUDA: run it on the CPU through the shim against the serial C, compile with nvcc.

``verify_on_cpu`` builds one C++ program (g++ -fopenmp, the shim header) that, for each item, builds
the arguments twice from the same seed, runs the serial C function on one copy and the generated host
launcher on the other, and compares every array. Items are batched into one compile and results are
cached on disk by the hash of the program text, so repeated checks never recompile.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from neurips26.methods.stparopt.cudagen import CudaTranslation
from neurips26.methods.stparopt.profiler import RUNTIME_DIR, cache_dir, require_tool, runtime_fingerprint
from neurips26.methods.stparopt.programs import ArgSpec, argument_free, argument_setup


@dataclass
class VerifyItem:
    """One check: the C source, its translation, the argument specs, trip count and input seeds."""

    source: str
    translation: CudaTranslation
    args: list[ArgSpec]
    n: int
    seeds: tuple[int, ...] = (101,)


def _rename(text: str, old: str, new: str) -> str:
    return re.sub(rf"\b{re.escape(old)}\b", new, text)


def build_check_program(items: list[VerifyItem], rtol: float = 1e-3) -> str:
    """The C++ text of the batched CPU check (one ``case`` per item, one JSON line each)."""
    parts = [
        "#define restrict __restrict",
        '#include "stp_inputs.h"',
        '#include "stparopt_cuda.h"',
        "#include <math.h>",
        "#ifndef STP_BLOCK\n#define STP_BLOCK 128\n#endif",
    ]
    cases = []
    for k, item in enumerate(items):
        t = item.translation
        reference, launcher = f"stp_ref{k}", f"stp_cuda{k}"
        parts.append(_rename(item.source, t.function, reference))
        generated = t.source.split("#endif\n", 1)[1] if "#endif\n" in t.source else t.source
        generated = _rename(generated, t.launcher, launcher)
        for kernel in t.kernels:
            generated = _rename(generated, kernel, f"{kernel}_{k}")
        parts.append(generated)
        body = [f"if (which < 0 || which == {k}) {{", "int bad = 0; double worst = 0;"]
        for seed in item.seeds:
            setup_r, call_r = argument_setup(item.args, item.n, seed, "_r")
            setup_c, call_c = argument_setup(item.args, item.n, seed, "_c")
            lens = [f"{a.name}_c_len" for a in item.args if a.kind in ("array", "perm", "repeats", "alias")]
            body += [
                "{",
                setup_r,
                setup_c,
                f"{reference}({', '.join(call_r)});",
                f"{launcher}({', '.join(call_c + lens)});",
            ]
            for a in item.args:
                if a.is_buffer:
                    body.append(
                        f"for (long q = 0; q < {a.name}_r_len; q++) {{"
                        f" double x = (double){a.name}_r[q], y = (double){a.name}_c[q];"
                        " if (x == y || (isnan(x) && isnan(y))) continue; double d = fabs(x - y);"
                        f" double s = {rtol} * (1.0 + fabs(x)); if (d > worst) worst = d;"
                        " if (!(d <= s)) bad++; }"
                    )
            body += [argument_free(item.args, "_r"), argument_free(item.args, "_c"), "}"]
        body.append(
            f'printf("{{\\"case\\":{k},\\"bad\\":%d,\\"worst\\":%.6g}}\\n",'
            " bad, isfinite(worst) ? worst : 1e300); fflush(stdout);\n}"
        )
        cases.append("\n".join(body))
    parts.append(
        "int main(int argc, char **argv) {\nint which = argc > 1 ? atoi(argv[1]) : -1;\n"
        + "\n".join(cases)
        + "\nreturn 0;\n}"
    )
    return "\n\n".join(parts)


def _compile_cpp(code: str, tag: str) -> tuple[Path | None, str]:
    gpp = require_tool("g++", "CUDA-on-CPU verification")
    digest = hashlib.sha256((code + runtime_fingerprint()).encode()).hexdigest()[:24]
    binary = cache_dir() / f"{tag}_{digest}"
    if binary.exists():
        return binary, ""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "check.cpp"
        path.write_text(code)
        out = Path(tmp) / "check"
        done = subprocess.run(
            [
                gpp,
                "-O0",
                "-w",
                "-fopenmp",
                "-std=c++17",
                f"-I{RUNTIME_DIR}",
                str(path),
                "-o",
                str(out),
                "-lm",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            return None, done.stderr[-2000:]
        shutil.move(str(out), binary)
    return binary, ""


def verify_on_cpu(
    items: list[VerifyItem],
    *,
    shuffle: bool = True,
    sequential: bool | None = None,
    seed: int = 0,
    timeout: float = 300.0,
) -> list[dict]:
    """Run each translation on CPU through the shim and compare with the serial C.

    Returns per item ``{"compiles": bool, "matches": bool, "bad": int, "worst": float, "error": str}``.
    ``sequential=None`` runs barrier-free kernels thread by thread in shuffled order (deterministic race
    exposure) and kernels with ``__syncthreads`` as OpenMP teams.
    """
    results: list[dict] = [dict() for _ in items]
    ready = [k for k, it in enumerate(items) if it.translation.ok]
    for k, it in enumerate(items):
        if not it.translation.ok:
            results[k] = {
                "compiles": False,
                "matches": False,
                "bad": -1,
                "worst": float("nan"),
                "error": "; ".join(it.translation.unsupported) or "no source",
            }
    groups: dict[bool, list[int]] = {}
    keys: dict[int, Path] = {}
    for k in ready:
        seq = sequential if sequential is not None else "__syncthreads" not in items[k].translation.source
        text = build_check_program([items[k]]) + f"|{shuffle}|{seq}|{seed}|{runtime_fingerprint()}"
        keys[k] = cache_dir() / f"verify_{hashlib.sha256(text.encode()).hexdigest()[:24]}.json"
        if keys[k].exists():
            results[k] = json.loads(keys[k].read_text())
        else:
            groups.setdefault(bool(seq), []).append(k)
    for seq, members in groups.items():
        _run_group([items[k] for k in members], members, results, shuffle, seq, seed, timeout)
        for k in members:
            keys[k].write_text(json.dumps(results[k]))
    return results


def _run_group(
    items: list[VerifyItem],
    members: list[int],
    results: list[dict],
    shuffle: bool,
    seq: bool,
    seed: int,
    timeout: float,
) -> None:
    env = {
        "STP_SHIM_SHUFFLE": str(int(shuffle)),
        "STP_SHIM_SEQUENTIAL": str(int(seq)),
        "STP_SHIM_SEED": str(seed),
        "OMP_WAIT_POLICY": "passive",
        "PATH": "/usr/bin:/bin",
    }
    binary, error = _compile_cpp(build_check_program(items), "check")
    if binary is None:
        if len(items) == 1:
            results[members[0]] = {
                "compiles": False,
                "matches": False,
                "bad": -1,
                "worst": float("nan"),
                "error": error,
            }
            return
        half = len(items) // 2  # find the item that breaks the batch
        _run_group(items[:half], members[:half], results, shuffle, seq, seed, timeout)
        _run_group(items[half:], members[half:], results, shuffle, seq, seed, timeout)
        return
    lines = _run(binary, [], env, timeout)
    seen = {r["case"]: r for r in lines}
    for local, k in enumerate(members):
        record = seen.get(local)
        if record is None:  # crashed (or timed out) inside the batch: run it alone
            alone = _run(binary, [str(local)], env, timeout)
            record = alone[0] if alone else None
        if record is None:
            results[k] = {
                "compiles": True,
                "matches": False,
                "bad": -1,
                "worst": float("nan"),
                "error": "crashed",
            }
        else:
            results[k] = {
                "compiles": True,
                "matches": record["bad"] == 0,
                "bad": record["bad"],
                "worst": record["worst"],
                "error": "",
            }


def _run(binary: Path, argv: list[str], env: dict, timeout: float) -> list[dict]:
    try:
        done = subprocess.run(
            [str(binary), *argv], capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return [json.loads(x) for x in stdout.splitlines() if x.startswith("{")]
    return [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]


def nvcc_available() -> bool:
    return shutil.which("nvcc") is not None or Path("/usr/local/bin/nvcc").exists()


def nvcc_compile(sources: list[str], timeout: float = 600.0) -> list[bool]:
    """Compile each generated ``.cu`` source with ``nvcc -c`` (no GPU needed); batched, cached.

    Raises ``RuntimeError`` naming nvcc when it is missing (the step is then unavailable).
    """
    nvcc = shutil.which("nvcc") or ("/usr/local/bin/nvcc" if Path("/usr/local/bin/nvcc").exists() else None)
    if nvcc is None:
        raise RuntimeError(
            "nvcc is missing: the CUDA compile check is unavailable (pip install nvidia-cuda-nvcc)"
        )
    if not sources:
        return []
    markers = [
        cache_dir() / f"nvcc_{hashlib.sha256((src + runtime_fingerprint()).encode()).hexdigest()[:24]}.json"
        for src in sources
    ]
    verdicts: list[bool | None] = [json.loads(m.read_text()) if m.exists() else None for m in markers]
    todo = [k for k, v in enumerate(verdicts) if v is None]
    if todo:
        for k, ok in zip(todo, _nvcc_batch(nvcc, [sources[k] for k in todo], timeout), strict=True):
            verdicts[k] = ok
            markers[k].write_text(json.dumps(ok))
    return [bool(v) for v in verdicts]


def _nvcc_batch(nvcc: str, sources: list[str], timeout: float) -> list[bool]:
    header = sources[0].split("#endif\n", 1)[0] + "#endif\n"
    code = header + "\n".join(s.split("#endif\n", 1)[1] for s in sources)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernels.cu"
        path.write_text(code)
        done = subprocess.run(
            [nvcc, "-c", f"-I{RUNTIME_DIR}", str(path), "-o", str(Path(tmp) / "k.o")],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    if done.returncode == 0:
        return [True] * len(sources)
    if len(sources) == 1:
        return [False]
    half = len(sources) // 2
    return _nvcc_batch(nvcc, sources[:half], timeout) + _nvcc_batch(nvcc, sources[half:], timeout)
