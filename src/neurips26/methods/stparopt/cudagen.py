"""CUDA generation from the C AST, one kernel family per top-level loop and strategy.

Strategies (combined per loop): ``map`` (iteration i -> thread ``blockIdx.x*blockDim.x+threadIdx.x``,
consecutive threads touch consecutive addresses: coalesced), ``privatize`` (scalars written first in an
iteration become thread locals), ``reduction`` (``X[c] += e`` -> per-thread accumulator, shared-memory
tree per block, one ``atomicAdd`` per block), ``atomic`` (``X[e] += v`` -> ``atomicAdd``), ``tile``
(a read-only array read at several constant offsets of i is staged in ``__shared__`` memory with its
halo), ``serial`` (one thread runs the loop as written: correct, not parallel).

Safety (ours): when a parallel plan rests on facts the source cannot prove (an indirect write
``a[idx[i]]``, pointer arguments that may overlap), the host launcher runs an **inspector** on the
actual inputs first: an exact conflict check of the indirect index values, and an overlap check of the
argument ranges. On a conflict it launches the atomic kernel when every hazardous write is a
commutative update, else the serial kernel. The kernel thus stays correct on inputs the profile never
saw.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from neurips26.methods.stparopt.frontend import CFunction, Loop

STRATEGIES = ("map", "privatize", "reduction", "atomic", "tile", "serial")
ATOMIC_TYPES = ("float", "double", "int", "unsigned")


@dataclass
class LoopPlan:
    """What to emit for one top-level loop: ``parallel`` and the strategies (see module docstring)."""

    loop: int
    parallel: bool
    strategies: list[str] = field(default_factory=list)
    inspector: bool = True  # guard data-dependent hazards on the host (always on; ablation flag)


@dataclass
class CudaTranslation:
    """Generated CUDA: ``source`` (kernels + host launcher ``launcher``), per-loop plans and strategies;
    ``unsupported`` lists loops that cannot be mapped (then ``source`` is empty: nothing is emitted)."""

    function: str
    launcher: str
    source: str
    plans: list[LoopPlan]
    kernels: list[str]
    unsupported: list[str] = field(default_factory=list)
    inspected: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unsupported and bool(self.source)


def _elem_type(function: CFunction, base: str) -> str | None:
    param = function.param(base)
    if param is not None and param.pointer:
        return param.ctype
    ctype, pointer = function.local_types.get(base, ("", False))
    return ctype if pointer else None


def _rewrite(node: Any, source: bytes, replace) -> str:
    pieces, cursor = [], node.start_byte
    for child in node.children:
        pieces.append(source[cursor : child.start_byte].decode())
        pieces.append(_rewrite(child, source, replace))
        cursor = child.end_byte
    pieces.append(source[cursor : node.end_byte].decode())
    return replace(node, "".join(pieces))


def _tile_candidates(loop: Loop, function: CFunction) -> dict[str, tuple[int, int]]:
    """Arrays read only, always at ``i + const``, with >= 2 offsets: base -> (kmin, kmax)."""
    if loop.step != 1:
        return {}
    offsets: dict[str, set[int]] = {}
    bad: set[str] = set()
    for site in loop.sites:
        match = re.fullmatch(rf"{re.escape(loop.var)}(?:\s*([+-])\s*(\d+))?", site.index_text.strip())
        param = function.param(site.base)
        if site.kind != "read" or match is None or param is None or not param.pointer:
            bad.add(site.base)
            continue
        k = int(match.group(2) or 0) * (-1 if match.group(1) == "-" else 1)
        offsets.setdefault(site.base, set()).add(k)
    return {b: (min(o), max(o)) for b, o in offsets.items() if b not in bad and len(o) >= 2}


def _hazards(loop: Loop, function: CFunction) -> tuple[list[str], bool, list[str]]:
    """(bases written through an indirect index, whether an alias check is needed, problems)."""
    problems = []
    indirect_bases = sorted({s.base for s in loop.sites if s.indirect and s.kind != "read"})
    for base in indirect_bases:
        if function.param(base) is None:
            problems.append(f"indirect write through {base!r}, which is not a pointer argument")
    used = sorted(
        {s.base for s in loop.sites if function.param(s.base) is not None and function.param(s.base).pointer}
    )
    written = {s.base for s in loop.sites if s.kind != "read"}
    needs_alias = (
        len(used) >= 2 and bool(written & set(used)) and not all(function.param(b).restrict for b in used)
    )
    return indirect_bases, needs_alias, problems


def _inspector_evaluable(loop: Loop, function: CFunction, bases: list[str]) -> bool:
    allowed = {loop.var, *(p.name for p in function.params), *loop.read_only_scalars}
    for site in loop.sites:
        if site.base in bases:
            names = set(re.findall(r"[A-Za-z_]\w*", site.index_text))
            if not site.index_text or not names <= allowed:
                return False
    return True


class _Emitter:
    def __init__(self, function: CFunction, block: int) -> None:
        self.f = function
        self.block = block
        self.kernels: list[str] = []
        self.code: list[str] = []

    def kernel_params(self, loop: Loop) -> tuple[list[str], list[str]]:
        """(kernel parameter declarations, the launcher's arguments for them)."""
        decls, args = [], []
        for p in self.f.params:
            decls.append(p.declaration().replace("restrict ", "__restrict__ "))
            args.append(
                f"({'const ' if p.const else ''}{p.ctype} *)stp_dev[{self.pointer_slot(p.name)}]"
                if p.pointer
                else p.name
            )
        for name in sorted({*loop.read_only_scalars, *loop.carried_scalars}):
            if name in self.f.local_types and self.f.param(name) is None:
                ctype, pointer = self.f.local_types[name]
                if pointer:
                    raise ValueError(f"local pointer {name!r} used in the loop")
                decls.append(f"{ctype} {name}")
                args.append(name)
        return decls, args

    def pointer_slot(self, name: str) -> int:
        return [p.name for p in self.f.params if p.pointer].index(name)

    def body(
        self,
        loop: Loop,
        strategies: list[str],
        tiles: dict[str, tuple[int, int]],
        accumulators: dict[int, str],
    ) -> str:
        source = self.f.source
        update_nodes = {(s.start, s.end) for s in loop.sites if s.kind == "update"}
        reduction_keys = set(accumulators)

        def replace(node: Any, text: str) -> str:
            if node.type == "subscript_expression" and "tile" in strategies:
                base = node.child_by_field_name("argument").text.decode()
                if base in tiles:
                    index = node.child_by_field_name("index").text.decode().strip()
                    m = re.fullmatch(rf"{re.escape(loop.var)}(?:\s*([+-])\s*(\d+))?", index)
                    k = int(m.group(2) or 0) * (-1 if m.group(1) == "-" else 1)
                    return f"stp_tile_{base}[threadIdx.x + {k - tiles[base][0]}]"
            if node.type in ("assignment_expression", "update_expression"):
                target = (
                    node.child_by_field_name("left")
                    if node.type == "assignment_expression"
                    else node.child_by_field_name("argument")
                )
                key = (target.start_byte, target.end_byte)
                if key in update_nodes and (key in reduction_keys or "atomic" in strategies):
                    op = (
                        node.child_by_field_name("operator").text.decode()
                        if node.type == "assignment_expression"
                        else ("+=" if b"++" in node.text else "-=")
                    )
                    value = (
                        node.child_by_field_name("right").text.decode()
                        if node.type == "assignment_expression"
                        else "1"
                    )
                    signed = f"({value})" if op == "+=" else f"-({value})"
                    if key in reduction_keys:
                        return f"{accumulators[key]} += {signed}"
                    ctype = _elem_type(self.f, target.child_by_field_name("argument").text.decode())
                    return f"atomicAdd(&({target.text.decode()}), ({ctype})({signed}))"
            return text

        text = _rewrite(loop.body, source, replace)
        return text[1:-1] if loop.body.type == "compound_statement" else text

    def parallel_kernel(self, loop: Loop, name: str, strategies: list[str]) -> str:
        decls, _ = self.kernel_params(loop)
        var_type = self.f.local_types.get(loop.var, ("int", False))[0]
        tiles = _tile_candidates(loop, self.f) if "tile" in strategies else {}
        reduction_sites = [
            s
            for s in loop.sites
            if s.kind == "update" and "reduction" in strategies and re.fullmatch(r"\d+", s.index_text.strip())
        ]
        accumulators = {(s.start, s.end): f"stp_acc{k}" for k, s in enumerate(reduction_sites)}
        lines = [f"__global__ void {name}({', '.join([*decls, 'long stp_count'])}) {{"]
        lines.append("  long stp_t = (long)blockIdx.x * blockDim.x + threadIdx.x;")
        for base, (kmin, kmax) in tiles.items():
            ctype = _elem_type(self.f, base)
            span = kmax - kmin
            lines += [
                f"  __shared__ {ctype} stp_tile_{base}[STP_BLOCK + {span}];",
                f"  for (long stp_j = threadIdx.x; stp_j < (long)blockDim.x + {span};"
                " stp_j += blockDim.x) {",
                f"    long stp_g = (long)blockIdx.x * blockDim.x + stp_j + ({kmin});",
                f"    if (stp_g - ({kmin}) < stp_count + {span})"
                f" stp_tile_{base}[stp_j] = {base}[({loop.lower}) + stp_g];",
                "  }",
                "  __syncthreads();",
            ]
        for site in reduction_sites:
            ctype = _elem_type(self.f, site.base)
            lines.append(f"  {ctype} {accumulators[(site.start, site.end)]} = 0;")
        lines.append("  if (stp_t < stp_count) {")
        lines.append(f"    {var_type} {loop.var} = ({loop.lower}) + ({var_type})stp_t * {loop.step};")
        for scalar in loop.private_scalars:
            if self.f.param(scalar) is None and scalar in self.f.local_types:
                lines.append(f"    {self.f.local_types[scalar][0]} {scalar};")
        lines.append("    " + self.body(loop, strategies, tiles, accumulators).strip())
        lines.append("  }")
        for k, site in enumerate(reduction_sites):
            ctype = _elem_type(self.f, site.base)
            acc = accumulators[(site.start, site.end)]
            lines += [
                f"  __shared__ {ctype} stp_red{k}[STP_BLOCK];",
                f"  stp_red{k}[threadIdx.x] = {acc};",
                "  __syncthreads();",
                "  for (unsigned stp_s = blockDim.x / 2; stp_s > 0; stp_s >>= 1) {",
                f"    if (threadIdx.x < stp_s) stp_red{k}[threadIdx.x] += stp_red{k}[threadIdx.x + stp_s];",
                "    __syncthreads();",
                "  }",
                f"  if (threadIdx.x == 0) atomicAdd(&({site.text}), stp_red{k}[0]);",
            ]
        lines.append("}")
        return "\n".join(lines)

    def serial_kernel(self, loop: Loop, name: str) -> str:
        decls, _ = self.kernel_params(loop)
        lines = [
            f"__global__ void {name}({', '.join([*decls, 'long stp_count'])}) {{",
            "  if (blockIdx.x != 0 || threadIdx.x != 0) return;",
        ]
        if (
            self.f.local_types.get(loop.var)
            and loop.node.child_by_field_name("initializer").type != "declaration"
        ):
            lines.append(f"  {self.f.local_types[loop.var][0]} {loop.var};")
        for scalar in loop.private_scalars:
            if self.f.param(scalar) is None and scalar in self.f.local_types:
                lines.append(f"  {self.f.local_types[scalar][0]} {scalar};")
        lines.append("  " + loop.text)
        lines.append("}")
        return "\n".join(lines)


def translate_function(function: CFunction, plans: list[LoopPlan], block_size: int = 128) -> CudaTranslation:
    """Kernels and the host launcher ``<name>_cuda(<params>, long <ptr>_len...)`` (host pointers in,
    results copied back; lengths are element counts)."""
    launcher = f"{function.name}_cuda"
    result = CudaTranslation(function.name, launcher, "", plans, [])
    body = function.node.child_by_field_name("body")
    top_loops = {loop.node.id: loop for loop in function.loops if loop.depth == 0}
    plan_of = {p.loop: p for p in plans}
    emitter = _Emitter(function, block_size)
    host: list[str] = []
    for statement in body.named_children:
        if statement.type == "comment":
            continue
        if statement.type == "declaration":
            if any(
                n.type in ("subscript_expression", "pointer_expression", "call_expression")
                for n in _walk(statement)
            ):
                result.unsupported.append(
                    f"line {statement.start_point.row + 1}: a declaration outside loops reads memory"
                )
            host.append("  " + statement.text.decode())
            continue
        loop = top_loops.get(statement.id)
        if loop is None:
            result.unsupported.append(
                f"line {statement.start_point.row + 1}: statement outside loops ({statement.type})"
            )
            continue
        if loop.unsupported:
            result.unsupported.append(f"loop at line {loop.line}: {loop.unsupported}")
            continue
        plan = plan_of.get(loop.index, LoopPlan(loop.index, False, ["serial"]))
        try:
            host.append(_emit_loop(emitter, loop, plan, result))
        except ValueError as exc:
            result.unsupported.append(f"loop at line {loop.line}: {exc}")
    if result.unsupported:
        return result
    pointers = [p for p in function.params if p.pointer]
    signature = ", ".join(
        [p.declaration() for p in function.params] + [f"long {p.name}_len" for p in pointers]
    )
    count = max(len(pointers), 1)
    launcher_lines = [f"void {launcher}({signature}) {{"]
    launcher_lines.append(
        f"  void *stp_host[{count}] = {{{', '.join(f'(void *){p.name}' for p in pointers) or '0'}}};"
    )
    launcher_lines.append(
        f"  size_t stp_bytes[{count}] = "
        f"{{{', '.join(f'(size_t){p.name}_len * sizeof(*{p.name})' for p in pointers) or '0'}}};"
    )
    launcher_lines += [
        f"  void *stp_dev[{count}];",
        "  stp_buffers_t stp_map;",
        f"  stp_map_buffers(&stp_map, {len(pointers)}, stp_host, stp_bytes, stp_dev);",
    ]
    launcher_lines += host
    launcher_lines += ["  STP_CHECK(cudaDeviceSynchronize());", "  stp_unmap_buffers(&stp_map);", "}"]
    header = (
        f'#include "stparopt_cuda.h"\n#include <math.h>\n#ifndef STP_BLOCK\n#define STP_BLOCK {block_size}\n'
        "#endif\n"
    )
    result.source = header + "\n\n".join(emitter.kernels) + "\n\n" + "\n".join(launcher_lines) + "\n"
    return result


def _walk(node: Any):
    yield node
    for child in node.children:
        yield from _walk(child)


def _emit_loop(emitter: _Emitter, loop: Loop, plan: LoopPlan, result: CudaTranslation) -> str:
    f = emitter.f
    stem = f"{f.name}_loop{loop.index}"
    count = f"(((long)({loop.upper}) - (long)({loop.lower}) + {loop.step - 1}) / {loop.step})"
    _, args = emitter.kernel_params(loop)
    launch_args = ", ".join([*args, "stp_count"])
    serial = f"{stem}_serial"
    emitter.kernels.append(emitter.serial_kernel(loop, serial))
    lines = [
        "  {",
        f"    long stp_count = {count};",
        "    int stp_mode = 0;  /* 0 parallel, 1 atomic, 2 serial */",
    ]
    if not plan.parallel or loop.carried_scalars:
        result.kernels.append(serial)
        lines += [f"    if (stp_count > 0) STP_LAUNCH({serial}, 1, 1, {launch_args});", "  }"]
        return "\n".join(lines)
    strategies = [s for s in plan.strategies if s != "serial"] or ["map"]
    parallel = f"{stem}_parallel"
    grid = "(stp_count + STP_BLOCK - 1) / STP_BLOCK"
    emitter.kernels.append(emitter.parallel_kernel(loop, parallel, strategies))
    result.kernels += [parallel, serial]
    bases, needs_alias, problems = _hazards(loop, f)
    hazardous = bool(bases) or needs_alias
    if hazardous and plan.inspector:
        if problems or (bases and not _inspector_evaluable(loop, f, bases)):
            lines.append("    stp_mode = 2;  /* hazard the inspector cannot evaluate */")
        else:
            result.inspected.append(loop.index)
            lines += _inspector_lines(loop, f, bases, needs_alias)
        atomic_ok = (
            bases
            and all(s.kind == "update" for s in loop.sites if s.base in bases and s.kind != "read")
            and not any(s.kind == "read" for s in loop.sites if s.base in bases)
            and all(_elem_type(f, b) in ATOMIC_TYPES for b in bases)
        )
        if atomic_ok and "atomic" not in strategies:
            atomic = f"{stem}_atomic"
            emitter.kernels.append(emitter.parallel_kernel(loop, atomic, [*strategies, "atomic"]))
            result.kernels.append(atomic)
            lines.append(f"    if (stp_mode == 1) STP_LAUNCH({atomic}, {grid}, STP_BLOCK, {launch_args});")
        elif "atomic" in strategies:
            lines.append(
                "    if (stp_mode == 1) stp_mode = 0;  /* the parallel kernel already uses atomics */"
            )
        else:
            lines.append("    if (stp_mode == 1) stp_mode = 2;")
    lines.append(
        f"    if (stp_mode == 0 && stp_count > 0) STP_LAUNCH({parallel}, {grid}, STP_BLOCK, {launch_args});"
    )
    lines.append(f"    if (stp_mode == 2 && stp_count > 0) STP_LAUNCH({serial}, 1, 1, {launch_args});")
    lines.append("  }")
    return "\n".join(lines)


def _inspector_lines(loop: Loop, f: CFunction, bases: list[str], needs_alias: bool) -> list[str]:
    lines = []
    var_type = f.local_types.get(loop.var, ("int", False))[0]
    kinds = {"read": 0, "write": 1, "rw": 1, "update": 2}
    for base in bases:
        sites = [s for s in loop.sites if s.base == base]
        lines += [
            "    {  /* inspector: exact conflict check of the indirect accesses on the actual input */",
            "      stp_touch_t *stp_touch = (stp_touch_t *)malloc(sizeof(stp_touch_t) *"
            f" (size_t)(stp_count > 0 ? stp_count : 1) * {len(sites)});",
            "      long stp_nt = 0;",
            "      for (long stp_t = 0; stp_t < stp_count; stp_t++) {",
            f"        {var_type} {loop.var} = ({loop.lower}) + ({var_type})stp_t * {loop.step};",
        ]
        for site in sites:
            lines.append(
                f"        stp_touch[stp_nt].address = (long)({site.index_text});"
                " stp_touch[stp_nt].iteration = stp_t; "
                f"stp_touch[stp_nt].kind = {kinds[site.kind]}; stp_nt++;"
            )
        lines += [
            "      }",
            "      { int stp_v = stp_inspect_conflicts(stp_touch, stp_nt);"
            " if (stp_v > stp_mode) stp_mode = stp_v; }",
            "      free(stp_touch);",
            "    }",
        ]
    if needs_alias:
        used = sorted({s.base for s in loop.sites if f.param(s.base) is not None and f.param(s.base).pointer})
        written = sorted({s.base for s in loop.sites if s.kind != "read" and s.base in used})
        checks = [
            f"stp_overlap({w}, (size_t){w}_len * sizeof(*{w}), {o}, (size_t){o}_len * sizeof(*{o}))"
            for w in written
            for o in used
            if o != w
        ]
        if checks:
            lines.append(f"    if ({' || '.join(checks)}) stp_mode = 2;  /* inspector: arguments overlap */")
    return lines
