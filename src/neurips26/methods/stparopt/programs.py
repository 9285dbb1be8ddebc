"""Programs with their run-time inputs: how each argument of a C function is built.

A :class:`LoopProgram` is one C function plus an :class:`ArgSpec` per parameter. The same source can be
parallel or not depending on these inputs (``a[idx[i]] = ...`` with a permutation or with repeats; two
pointer arguments that overlap or not), which is why labels belong to the program *with* its inputs.
:func:`argument_setup` emits the C code that allocates and fills the arguments from a seed; the
profiler, the exhaustive label check and the CUDA-on-CPU verification all use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ARG_KINDS = ("size", "array", "perm", "repeats", "alias", "scalar")


@dataclass(frozen=True)
class ArgSpec:
    """How to build one argument. Arrays hold ``scale * n + pad`` elements; ``perm`` is a permutation of
    ``0..n-1``; ``repeats`` draws ``n`` indices from ``0..n-1`` with replacement; ``alias`` points
    ``offset`` elements into the array ``alias_of``; ``scalar`` is the constant ``value``; ``size`` is n.
    """

    name: str
    ctype: str
    kind: str
    scale: int = 1
    pad: int = 0
    alias_of: str = ""
    offset: int = 0
    value: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ARG_KINDS:
            raise ValueError(f"ArgSpec.kind must be one of {ARG_KINDS}, got {self.kind!r}")
        if self.kind == "alias" and not self.alias_of:
            raise ValueError(f"ArgSpec {self.name!r}: kind='alias' needs alias_of")

    @property
    def is_buffer(self) -> bool:
        return self.kind in ("array", "perm", "repeats")

    def length(self, n: int) -> int:
        return self.scale * n + self.pad if self.kind == "array" else n


@dataclass
class LoopProgram:
    """One synthetic program: a C function, its argument specs, the family and the label."""

    family: str
    group: str  # affine, irregular or pointer
    source: str
    function: str
    args: list[ArgSpec]
    label: int  # 1: the loop's iterations may run in any order (commutative updates allowed)
    strategy: str  # the strategy the generator meant (map, reduction, atomic, tile, serial)
    data: str = ""  # which run-time variant decided the label (perm, repeats, overlap, ...)
    meta: dict[str, object] = field(default_factory=dict)


def validate_args(params: list, args: list[ArgSpec]) -> None:
    """Check that ``args`` matches the C signature ``params`` (names, order, pointer vs value).

    Raises ``ValueError`` naming the first mismatching argument.
    """
    if [p.name for p in params] != [a.name for a in args]:
        raise ValueError(
            f"args {[a.name for a in args]} do not match the signature's parameters "
            f"{[p.name for p in params]}"
        )
    names = {a.name: a for a in args}
    for param, arg in zip(params, args, strict=True):
        if param.pointer and arg.kind in ("size", "scalar"):
            raise ValueError(f"args[{arg.name!r}]: parameter is a pointer, got kind {arg.kind!r}")
        if not param.pointer and arg.kind not in ("size", "scalar"):
            raise ValueError(
                f"args[{arg.name!r}]: parameter is a value ({param.ctype}), got kind {arg.kind!r}"
            )
        if arg.kind in ("perm", "repeats") and param.ctype not in ("int", "long", "unsigned"):
            raise ValueError(f"args[{arg.name!r}]: index arrays must be int, the parameter is {param.ctype}")
        if arg.kind == "alias" and (arg.alias_of not in names or not names[arg.alias_of].is_buffer):
            raise ValueError(f"args[{arg.name!r}]: alias_of={arg.alias_of!r} must name an array argument")


def default_args(params: list) -> list[ArgSpec]:
    """Inputs for a user's function without specs: the first int is n, pointers are arrays of 2n + 16
    elements (int pointers hold a permutation of 0..n-1), other values are 1."""
    args, have_size = [], False
    for p in params:
        if p.pointer:
            kind = "perm" if p.ctype in ("int", "long", "unsigned") else "array"
            args.append(ArgSpec(p.name, p.ctype, kind, scale=2, pad=16))
        elif p.ctype in ("int", "long", "unsigned", "size_t") and not have_size:
            args.append(ArgSpec(p.name, p.ctype, "size"))
            have_size = True
        else:
            args.append(ArgSpec(p.name, p.ctype, "scalar", value=1.0))
    return args


def argument_setup(
    args: list[ArgSpec], n: int | str, seed: int | str, suffix: str = ""
) -> tuple[str, list[str]]:
    """C statements that build the arguments for trip count ``n`` from ``seed`` (numbers or C
    expressions); returns (code, call args). Buffers are named ``<name><suffix>``, their lengths
    ``<name><suffix>_len``.
    """
    seed_text = f"{seed & 0xFFFFFFFF}ull" if isinstance(seed, int) else f"(uint64_t)({seed})"
    lines = [f"uint64_t stp_state{suffix} = {seed_text} * 2654435761ull + 1;"]
    call = [f"{arg.name}{suffix}" for arg in args]
    for arg in sorted(args, key=lambda a: a.kind == "alias"):  # aliases after the arrays they point into
        var = f"{arg.name}{suffix}"
        if arg.kind == "size":
            lines.append(f"{arg.ctype} {var} = ({arg.ctype}){n};")
        elif arg.kind == "scalar":
            lines.append(f"{arg.ctype} {var} = ({arg.ctype}){arg.value!r};")
        elif arg.kind == "alias":
            lines.append(f"{arg.ctype} *{var} = {arg.alias_of}{suffix} + ({arg.offset});")
            lines.append(f"long {var}_len = {arg.alias_of}{suffix}_len - ({arg.offset});")
        else:
            length = (
                arg.length(n)
                if isinstance(n, int)
                else (f"({arg.scale} * (long)({n}) + {arg.pad})" if arg.kind == "array" else n)
            )
            lines.append(f"long {var}_len = {length};")
            lines.append(f"{arg.ctype} *{var} = ({arg.ctype} *)calloc({length} + 1, sizeof({arg.ctype}));")
            if arg.kind == "perm":
                lines.append(f"stp_fill_perm((int *){var}, {length}, &stp_state{suffix});")
            elif arg.kind == "repeats":
                lines.append(f"stp_fill_repeats((int *){var}, {length}, {n}, &stp_state{suffix});")
            else:
                lines.append(f"STP_FILL_UNIFORM({arg.ctype}, {var}, {length}, &stp_state{suffix});")
    return "\n".join(lines), call


def argument_free(args: list[ArgSpec], suffix: str = "") -> str:
    return "\n".join(f"free({a.name}{suffix});" for a in args if a.is_buffer)
