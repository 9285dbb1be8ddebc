"""Synthetic loop generator (ours): loop families with labels known by construction.

Each family emits a C function with one loop plus its run-time inputs. Labels are by construction and
:func:`neurips26.methods.stparopt.profiler.exhaustive_labels` confirms them with an exact dependence
check on the labelling inputs (a test asserts both agree). Some families share one source text across
labels (``indirect_store`` with a permutation or with repeats, ``alias`` with overlapping or disjoint
arguments, ``conditional`` with a threshold that fires or not): there the source alone cannot decide.
"""

from __future__ import annotations

import numpy as np

from neurips26.methods.stparopt.programs import ArgSpec, LoopProgram

FAMILY_GROUPS: dict[str, str] = {
    "map": "affine",
    "stencil": "affine",
    "stencil_inplace": "affine",
    "reduction": "affine",
    "scan": "affine",
    "strided": "affine",
    "shifted_copy": "affine",
    "indirect_store": "irregular",
    "indirect_update": "irregular",
    "gather": "irregular",
    "conditional": "irregular",
    "pointer_chase": "pointer",
    "alias": "pointer",
}
FAMILIES = tuple(FAMILY_GROUPS)
_ARRAYS = ("a", "b", "c", "x", "y", "z", "u", "v", "w", "src", "dst", "buf", "val", "out", "in0", "acc")
_INDEX = ("idx", "perm", "map", "col", "ind", "pos")


class _Names:
    def __init__(self, rng: np.random.Generator) -> None:
        self.pool = list(rng.permutation(_ARRAYS))
        self.index = str(rng.choice(_INDEX))
        self.rng = rng

    def take(self) -> str:
        return self.pool.pop()


def _const(rng: np.random.Generator) -> str:
    return f"{rng.choice([0.5, 1.5, 2.0, 0.25, 3.0, 0.75])}f"


def _expr(rng: np.random.Generator, reads: list[str]) -> str:
    """A small arithmetic expression over the read accesses ``reads``."""
    terms = [f"{r} * {_const(rng)}" if rng.random() < 0.5 else r for r in reads]
    expr = " + ".join(terms) if len(terms) > 1 else terms[0]
    if rng.random() < 0.3:
        expr = f"({expr}) * {_const(rng)}"
    if rng.random() < 0.2:
        expr = f"{expr} + {_const(rng)}"
    return expr


def _wrap(name: str, params: list[str], body: list[str], pre: list[str] | None = None, var: str = "i") -> str:
    inner = "\n".join(f"    {line}" for line in body)
    before = "".join(f"  {line}\n" for line in (pre or []))
    head = f"void {name}({', '.join(params)}) {{\n{before}"
    return f"{head}  for (int {var} = 0; {var} < n; {var}++) {{\n{inner}\n  }}\n}}\n"


def _maybe_extra(
    rng: np.random.Generator, names: _Names, var: str, args: list[ArgSpec], params: list[str], body: list[str]
) -> None:
    """Sometimes add an independent map statement (noise that never changes the label)."""
    if rng.random() < 0.4:
        dst, src = names.take(), names.take()
        params += [f"float *{dst}", f"float *{src}"]
        args += [ArgSpec(dst, "float", "array"), ArgSpec(src, "float", "array")]
        body.append(f"{dst}[{var}] = {src}[{var}] * {_const(rng)};")


def generate_program(
    family: str, rng: np.random.Generator, data: str | None = None, name: str = "kernel"
) -> LoopProgram:
    """One program of ``family``; ``data`` picks the run-time variant where the family has two
    (``perm``/``repeats``, ``overlap``/``disjoint``, ``fires``/``silent``); None draws it."""
    if family not in FAMILY_GROUPS:
        raise ValueError(f"family={family!r} is not one of {FAMILIES}")
    names = _Names(rng)
    var = str(rng.choice(["i", "i", "k", "j"]))
    args: list[ArgSpec] = [ArgSpec("n", "int", "size")]
    params = ["int n"]
    body: list[str] = []
    pre: list[str] = []
    label, strategy, variant = 1, "map", ""
    a, b, c = names.take(), names.take(), names.take()
    if family == "map":
        params += [f"float *{a}", f"const float *{b}", f"const float *{c}"]
        args += [ArgSpec(a, "float", "array"), ArgSpec(b, "float", "array"), ArgSpec(c, "float", "array")]
        if rng.random() < 0.5:
            body += [f"float t = {_expr(rng, [f'{b}[{var}]'])};", f"{a}[{var}] = t + {c}[{var}];"]
        else:
            body.append(f"{a}[{var}] = {_expr(rng, [f'{b}[{var}]', f'{c}[{var}]'])};")
    elif family == "stencil":
        width = int(rng.integers(2, 4))
        params += [f"float *{a}", f"const float *{b}"]
        args += [ArgSpec(a, "float", "array"), ArgSpec(b, "float", "array", pad=width)]
        body.append(
            f"{a}[{var}] = "
            f"{_expr(rng, [f'{b}[{var} + {k}]' if k else f'{b}[{var}]' for k in range(width + 1)])};"
        )
        strategy = "tile"
    elif family == "stencil_inplace":
        params += [f"float *{a}"]
        args += [ArgSpec(a, "float", "array", pad=2)]
        body.append(f"{a}[{var} + 1] = ({a}[{var}] + {a}[{var} + 2]) * {_const(rng)};")
        label, strategy = 0, "serial"
    elif family == "reduction":
        params += [f"float *{a}", f"const float *{b}", f"const float *{c}"]
        args += [
            ArgSpec(a, "float", "array", scale=0, pad=1),
            ArgSpec(b, "float", "array"),
            ArgSpec(c, "float", "array"),
        ]
        body.append(f"{a}[0] += {_expr(rng, [f'{b}[{var}] * {c}[{var}]'])};")
        strategy = "reduction"
    elif family == "scan":
        params += [f"float *{a}", f"const float *{b}"]
        args += [ArgSpec(a, "float", "array", pad=1), ArgSpec(b, "float", "array")]
        body.append(f"{a}[{var} + 1] = {a}[{var}] + {_expr(rng, [f'{b}[{var}]'])};")
        label, strategy = 0, "serial"
    elif family == "strided":
        stride, offset = int(rng.integers(1, 5)), int(rng.integers(0, 4))
        params += [f"float *{a}", f"const float *{b}"]
        args += [ArgSpec(a, "float", "array", scale=stride, pad=offset + 1), ArgSpec(b, "float", "array")]
        body.append(f"{a}[{stride} * {var} + {offset}] = {_expr(rng, [f'{b}[{var}]'])};")
        variant = f"stride={stride},offset={offset}"
    elif family == "shifted_copy":
        shift = int(rng.integers(1, 4))
        params += [f"float *{a}"]
        args += [ArgSpec(a, "float", "array", pad=shift)]
        body.append(f"{a}[{var}] = {_expr(rng, [f'{a}[{var} + {shift}]'])};")
        label, strategy = 0, "serial"
    elif family == "indirect_store":
        variant = data or str(rng.choice(["perm", "repeats"]))
        ix = names.index
        params += [f"float *{a}", f"const int *{ix}", f"const float *{b}"]
        args += [ArgSpec(a, "float", "array"), ArgSpec(ix, "int", variant), ArgSpec(b, "float", "array")]
        body.append(f"{a}[{ix}[{var}]] = {_expr(rng, [f'{b}[{var}]'])};")
        label, strategy = (1, "map") if variant == "perm" else (0, "serial")
    elif family == "indirect_update":
        variant = data or str(rng.choice(["perm", "repeats"]))
        ix = names.index
        params += [f"float *{a}", f"const int *{ix}", f"const float *{b}"]
        args += [ArgSpec(a, "float", "array"), ArgSpec(ix, "int", variant), ArgSpec(b, "float", "array")]
        body.append(f"{a}[{ix}[{var}]] += {_expr(rng, [f'{b}[{var}]'])};")
        strategy = "map" if variant == "perm" else "atomic"
    elif family == "gather":
        ix = names.index
        variant = data or str(rng.choice(["perm", "repeats"]))
        params += [f"float *{a}", f"const float *{b}", f"const int *{ix}"]
        args += [ArgSpec(a, "float", "array"), ArgSpec(b, "float", "array"), ArgSpec(ix, "int", variant)]
        body.append(f"{a}[{var}] = {_expr(rng, [f'{b}[{ix}[{var}]]'])};")
    elif family == "conditional":
        variant = data or str(rng.choice(["fires", "silent"]))
        params += [f"float *{a}", f"const float *{b}", "float t"]
        threshold = 0.5 if variant == "fires" else 2.0  # b is uniform in [0, 1): 2.0 never fires
        args += [
            ArgSpec(a, "float", "array", pad=1),
            ArgSpec(b, "float", "array"),
            ArgSpec("t", "float", "scalar", value=threshold),
        ]
        body.append(f"if ({b}[{var}] > t) {a}[{var} + 1] = {a}[{var}] * {_const(rng)};")
        body.append(f"else {a}[{var}] = {_expr(rng, [f'{b}[{var}]'])};")
        label, strategy = (0, "serial") if variant == "fires" else (1, "map")
    elif family == "pointer_chase":
        nx = names.index
        params += [f"float *{a}", f"const float *{b}", f"const int *{nx}"]
        args += [ArgSpec(a, "float", "array"), ArgSpec(b, "float", "array"), ArgSpec(nx, "int", "perm")]
        pre.append("int p = 0;")
        body += [f"p = {nx}[p];", f"{a}[{var}] = {_expr(rng, [f'{b}[p]'])};"]
        label, strategy = 0, "serial"
    elif family == "alias":
        variant = data or str(rng.choice(["overlap", "disjoint"]))
        params += [f"float *{a}", f"const float *{b}"]
        offset, ahead = int(rng.integers(1, 4)), rng.random() < 0.5  # drawn for every variant: same source
        if variant == "disjoint":
            args += [ArgSpec(a, "float", "array"), ArgSpec(b, "float", "array")]
        elif ahead:  # b runs ahead of a: a[i] = a[i + off] (anti-dependence)
            args += [
                ArgSpec(a, "float", "array", pad=offset),
                ArgSpec(b, "float", "alias", alias_of=a, offset=offset),
            ]
        else:  # a runs ahead of b: a[i + off] = a[i] (flow dependence); a is the alias
            args = [
                ArgSpec("n", "int", "size"),
                ArgSpec(a, "float", "alias", alias_of=b, offset=offset),
                ArgSpec(b, "float", "array", pad=offset),
            ]
        body.append(f"{a}[{var}] = {_expr(rng, [f'{b}[{var}]'])};")
        label, strategy = (1, "map") if variant == "disjoint" else (0, "serial")
    if family != "pointer_chase" and args[-1].kind != "scalar":
        _maybe_extra(rng, names, var, args, params, body)
    source = _wrap(name, params, body, pre, var)
    return LoopProgram(family, FAMILY_GROUPS[family], source, name, args, label, strategy, variant)


def generate_dataset(n_programs: int, seed: int, families: tuple[str, ...] = FAMILIES) -> list[LoopProgram]:
    """``n_programs`` programs, families drawn round-robin (balanced), variants at random."""
    if n_programs < 1:
        raise ValueError(f"n_programs must be >= 1, got {n_programs}")
    unknown = set(families) - set(FAMILIES)
    if unknown or not families:
        raise ValueError(f"families must be a non-empty subset of {FAMILIES}, got {families}")
    rng = np.random.default_rng(seed)
    return [
        generate_program(families[k % len(families)], rng, name=f"kernel_{seed}_{k}")
        for k in range(n_programs)
    ]
