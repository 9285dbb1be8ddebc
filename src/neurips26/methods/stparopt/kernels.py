"""Authored PolyBench-style kernels (ours; PolyBench/C itself is not on this machine).

Each is a C function in the subset the generator maps, with the inputs it is run on and its label
(checked by the exhaustive dependence check in the tests). Use them as real-looking examples:
``analyze(k.source, k.function, args=k.args)``.
"""

from __future__ import annotations

from neurips26.methods.stparopt.programs import ArgSpec, LoopProgram

M = 8  # inner dimension of the matrix kernels


def _n(*rest: ArgSpec) -> list[ArgSpec]:
    return [ArgSpec("n", "int", "size"), *rest]


KERNELS: tuple[LoopProgram, ...] = (
    LoopProgram(
        "saxpy",
        "affine",
        "void saxpy(int n, float alpha, const float *x, float *y) {\n"
        "  for (int i = 0; i < n; i++) y[i] = alpha * x[i] + y[i];\n}\n",
        "saxpy",
        _n(
            ArgSpec("alpha", "float", "scalar", value=2.0),
            ArgSpec("x", "float", "array"),
            ArgSpec("y", "float", "array"),
        ),
        1,
        "map",
    ),
    LoopProgram(
        "jacobi_1d",
        "affine",
        "void jacobi_1d(int n, const float *a, float *b) {\n"
        "  for (int i = 0; i < n; i++) b[i] = 0.33333f * (a[i] + a[i + 1] + a[i + 2]);\n}\n",
        "jacobi_1d",
        _n(ArgSpec("a", "float", "array", pad=2), ArgSpec("b", "float", "array")),
        1,
        "tile",
    ),
    LoopProgram(
        "seidel_1d",
        "affine",
        "void seidel_1d(int n, float *a) {\n"
        "  for (int i = 0; i < n; i++) a[i + 1] = 0.33333f * (a[i] + a[i + 1] + a[i + 2]);\n}\n",
        "seidel_1d",
        _n(ArgSpec("a", "float", "array", pad=2)),
        0,
        "serial",
    ),
    LoopProgram(
        "atax_rows",
        "affine",
        "void atax_rows(int n, int m, const float *A, const float *x, float *y) {\n"
        "  for (int i = 0; i < n; i++) {\n    float t = 0.0f;\n"
        "    for (int j = 0; j < m; j++) t += A[i * m + j] * x[j];\n    y[i] = t;\n  }\n}\n",
        "atax_rows",
        _n(
            ArgSpec("m", "int", "scalar", value=M),
            ArgSpec("A", "float", "array", scale=M),
            ArgSpec("x", "float", "array", scale=0, pad=M),
            ArgSpec("y", "float", "array"),
        ),
        1,
        "map",
    ),
    LoopProgram(
        "bicg_columns",
        "affine",
        "void bicg_columns(int n, int m, float *s, const float *r, const float *A) {\n"
        "  for (int i = 0; i < n; i++) {\n"
        "    for (int j = 0; j < m; j++) s[j] += r[i] * A[i * m + j];\n  }\n}\n",
        "bicg_columns",
        _n(
            ArgSpec("m", "int", "scalar", value=M),
            ArgSpec("s", "float", "array", scale=0, pad=M),
            ArgSpec("r", "float", "array"),
            ArgSpec("A", "float", "array", scale=M),
        ),
        1,
        "atomic",
    ),
    LoopProgram(
        "histogram",
        "irregular",
        "void histogram(int n, float *hist, const int *bin, const float *w) {\n"
        "  for (int i = 0; i < n; i++) hist[bin[i]] += w[i];\n}\n",
        "histogram",
        _n(
            ArgSpec("hist", "float", "array"),
            ArgSpec("bin", "int", "repeats"),
            ArgSpec("w", "float", "array"),
        ),
        1,
        "atomic",
        "repeats",
    ),
    LoopProgram(
        "dot",
        "affine",
        "void dot(int n, const float *x, const float *y, float *out) {\n"
        "  for (int i = 0; i < n; i++) out[0] += x[i] * y[i];\n}\n",
        "dot",
        _n(
            ArgSpec("x", "float", "array"),
            ArgSpec("y", "float", "array"),
            ArgSpec("out", "float", "array", scale=0, pad=1),
        ),
        1,
        "reduction",
    ),
    LoopProgram(
        "prefix_sum",
        "affine",
        "void prefix_sum(int n, float *a, const float *x) {\n"
        "  for (int i = 0; i < n; i++) a[i + 1] = a[i] + x[i];\n}\n",
        "prefix_sum",
        _n(ArgSpec("a", "float", "array", pad=1), ArgSpec("x", "float", "array")),
        0,
        "serial",
    ),
    LoopProgram(
        "permute",
        "irregular",
        "void permute(int n, float *y, const int *p, const float *x) {\n"
        "  for (int i = 0; i < n; i++) y[p[i]] = x[i];\n}\n",
        "permute",
        _n(ArgSpec("y", "float", "array"), ArgSpec("p", "int", "perm"), ArgSpec("x", "float", "array")),
        1,
        "map",
        "perm",
    ),
)
