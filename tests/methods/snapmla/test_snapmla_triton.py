"""SnapMLA's Triton decode kernel against the CPU reference.

Triton's interpreter (``TRITON_INTERPRET=1``) runs the kernel on CPU tensors, but the variable must be set
before the kernel module is imported and must not leak into other tests. So one subprocess runs every
interpreter check (``python -m neurips26.methods.snapmla.triton_checks``) and prints JSON; the tests assert
on it. This validates numerics only; the interpreter says nothing about GPU speed. The ``gpu`` tests run
the same checks natively and are skipped without CUDA.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from neurips26.methods.snapmla import FP32, RECIPES, SNAPMLA
from neurips26.methods.snapmla.triton_checks import CASES
from neurips26.methods.snapmla.triton_kernel import (
    causal_decode_mask,
    interpreter_active,
    snapmla_decode_triton,
)

triton = pytest.importorskip("triton")  # the kernel module imports without it; these tests need it
# Triton 3.4-3.6's interpreter fails on numpy 2 ("only 0-dimensional arrays can be converted to Python
# scalars"); 3.7.1, 3.8.0 and 3.9.0 were checked to work
INTERPRETER_WORKS = tuple(int(part) for part in triton.__version__.split(".")[:2]) >= (3, 7)
SRC = Path(__file__).resolve().parents[3] / "src"
# kernel vs reference: both use fp32 accumulators; they differ only in summation order and libm's exp,
# which we measured at <= 2e-7 relative. 1e-5 leaves room for a rare flipped FP8 rounding of P.
AGREEMENT = 1e-5


def _run_checks_on_gpu(*args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    env.pop("TRITON_INTERPRET", None)
    completed = subprocess.run(
        [sys.executable, "-m", "neurips26.methods.snapmla.triton_checks", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


README = SRC / "neurips26" / "methods" / "snapmla" / "README.md"
# one interpreter subprocess for everything: the checks module's report plus the README's Triton snippet
INTERPRETER_SCRIPT = f"""
import json, re
from pathlib import Path
import torch
torch.set_num_threads(1)
from neurips26.methods.snapmla import triton_checks
snippet = re.findall(r"```python\\n(.*?)```", Path({str(README)!r}).read_text(), re.DOTALL)[1]
namespace = {{}}
# seeded: an unseeded draw can land a P value on an FP8 rounding boundary, where the kernel's and the
# reference's accumulation orders round it differently (relative error ~4e-4 once in a full-suite run)
torch.manual_seed(0)
exec(compile(snippet, "README.md", "exec"), namespace)
report = {{
    "rounding": triton_checks.rounding_agreement(),
    "cases": triton_checks.kernel_agreement(),
    "merge": triton_checks.merge_agreement(),
    "model": triton_checks.model_agreement(),
    "readme_relative_error": float((namespace["out"] - namespace["ref"]).norm() / namespace["ref"].norm()),
}}
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def interpreter_report() -> dict:
    if not INTERPRETER_WORKS:
        pytest.skip(f"triton {triton.__version__}'s interpreter does not run on numpy 2; needs triton>=3.7")
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1", "TRITON_INTERPRET": "1"}
    completed = subprocess.run(
        [sys.executable, "-c", INTERPRETER_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_readme_triton_snippet_runs_under_interpreter(interpreter_report: dict) -> None:
    assert interpreter_report["readme_relative_error"] < AGREEMENT


def test_emulated_roundings_equal_torch_casts(interpreter_report: dict) -> None:
    rounding = interpreter_report["rounding"]
    assert rounding["e4m3_values"] > 8000 and rounding["bf16_values"] > 20000
    assert rounding["e4m3_mismatches"] == 0
    assert rounding["bf16_mismatches"] == 0


@pytest.mark.parametrize("case", [c.name for c in CASES])
def test_kernel_matches_reference_under_interpreter(interpreter_report: dict, case: str) -> None:
    row = next(r for r in interpreter_report["cases"] if r["name"] == case)
    assert row["finite"]
    assert row["rel_error_vs_reference"] < AGREEMENT, row
    # the kernel's quantization error is the reference's, not something of its own
    assert abs(row["kernel_rel_error_vs_fp32"] - row["reference_rel_error_vs_fp32"]) < AGREEMENT
    if row["recipe"] == "snapmla":
        assert row["reference_rel_error_vs_fp32"] > 100 * row["rel_error_vs_reference"]
        assert row["packed_rows_identical"]


def test_triton_split_merge_matches_torch_merge(interpreter_report: dict) -> None:
    merge = interpreter_report["merge"]
    assert merge["finite"] and merge["empty_row_zero"]
    assert merge["rel_error"] < 1e-6


def test_triton_kernel_inside_the_model_matches_reference(interpreter_report: dict) -> None:
    model = interpreter_report["model"]
    assert model["decode_steps"] >= 3
    assert model["max_rel_logit_difference"] < AGREEMENT
    assert model["tokens_equal"]


def test_interpreter_report_covers_splits_queries_and_real_dims(interpreter_report: dict) -> None:
    rows = interpreter_report["cases"]
    assert any(r["num_splits"] > 1 for r in rows)
    assert any(r["n_query"] > 1 and r["n_tokens"] % 64 for r in rows)
    assert any(r["d_c"] == 512 and r["d_r"] == 64 for r in rows)
    assert any(r["heads"] * r["n_query"] > 16 for r in rows)


def test_module_imports_and_explains_without_triton(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "triton", None)  # makes `import triton` raise ImportError
    monkeypatch.setitem(sys.modules, "triton.language", None)
    path = SRC / "neurips26" / "methods" / "snapmla" / "triton_kernel.py"
    spec = importlib.util.spec_from_file_location("snapmla_triton_kernel_without_triton", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert not module.TRITON_AVAILABLE and not module.interpreter_active()
    with pytest.raises(ImportError, match="pip install"):
        module.snapmla_decode_triton(*_inputs(), 0.1)


# ---- in-process: input checks (no kernel launch) --------------------------------------------------------


def _inputs(d_c: int = 64, d_r: int = 16, tokens: int = 8, n_query: int = 1):
    q_content, q_rope = torch.randn(1, 2, n_query, d_c), torch.randn(1, 2, n_query, d_r)
    encoded = SNAPMLA.encode(torch.randn(1, tokens, d_c), torch.randn(1, tokens, d_r))
    return q_content, q_rope, encoded


def test_cpu_tensors_without_interpreter_raise_clear_error() -> None:
    if interpreter_active():
        pytest.skip("TRITON_INTERPRET is set in this process")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        snapmla_decode_triton(*_inputs(), 0.1)


@pytest.mark.parametrize(
    ("recipe", "message"),
    [
        (RECIPES["naive_fp8"], "not supported by the Triton kernel"),
        (FP32, "not supported by the Triton kernel"),
        (SNAPMLA.with_options(block_size=32), "block_size=32"),
        (SNAPMLA.with_options(scale_mode="pow2"), "scale_mode='pow2'"),
    ],
)
def test_unsupported_recipes_are_rejected(recipe, message: str) -> None:
    q_content, q_rope, _ = _inputs()
    encoded = recipe.encode(torch.randn(1, 8, 64), torch.randn(1, 8, 16))
    with pytest.raises(ValueError, match=message):
        snapmla_decode_triton(q_content, q_rope, encoded, 0.1, recipe=recipe)


def test_bad_shapes_and_options_name_the_argument() -> None:
    q_content, q_rope, encoded = _inputs()
    with pytest.raises(ValueError, match="do not match the cache layout"):
        snapmla_decode_triton(q_content[..., :32], q_rope, encoded, 0.1)
    with pytest.raises(ValueError, match="kv_lora_rank=48"):
        snapmla_decode_triton(*_inputs(d_c=48), 0.1)
    with pytest.raises(ValueError, match="qk_rope_head_dim=8"):
        snapmla_decode_triton(*_inputs(d_r=8), 0.1)
    with pytest.raises(ValueError, match="new query tokens"):
        snapmla_decode_triton(*_inputs(tokens=2, n_query=3), 0.1)
    with pytest.raises(ValueError, match="num_splits"):
        snapmla_decode_triton(q_content, q_rope, encoded, 0.1, num_splits=0)
    with pytest.raises(ValueError, match="block_rows=24"):
        snapmla_decode_triton(q_content, q_rope, encoded, 0.1, block_rows=24)
    with pytest.raises(ValueError, match="q_content and q_rope"):
        snapmla_decode_triton(q_content[0], q_rope, encoded, 0.1)


def test_use_latent_mla_rejects_unknown_kernel_and_padding_masks() -> None:
    from neurips26.methods.snapmla.integration import _require_causal_mask, use_latent_mla
    from neurips26.zoo.builders import tiny_deepseek_v3

    model = tiny_deepseek_v3()
    with (
        pytest.raises(ValueError, match="kernel='cuda' is not allowed"),
        use_latent_mla(model, SNAPMLA, kernel="cuda"),
    ):
        pass
    _require_causal_mask(causal_decode_mask(2, 6), 2, 6)  # plain causal: accepted
    _require_causal_mask(None, 1, 6)
    padded = causal_decode_mask(2, 6)
    padded[:, 0] = torch.finfo(torch.float32).min  # a left-padded sequence
    with pytest.raises(ValueError, match="plain causal attention only"):
        _require_causal_mask(padded, 2, 6)


def test_causal_decode_mask_matches_decode_semantics() -> None:
    mask = causal_decode_mask(3, 5)
    visible = torch.isfinite(mask)
    # new token i of 3 sits at position 5 - 3 + i and sees itself and everything before it
    assert visible.tolist() == [
        [True, True, True, False, False],
        [True, True, True, True, False],
        [True, True, True, True, True],
    ]


# ---- on a GPU ----------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("emulated", [False, True], ids=["native_casts", "emulated_casts"])
def test_kernel_matches_reference_on_gpu(emulated: bool) -> None:
    report = _run_checks_on_gpu("--device", "cuda", *(["--emulated-casts"] if emulated else []))
    assert report["rounding"]["e4m3_mismatches"] == 0 and report["rounding"]["bf16_mismatches"] == 0
    for row in report["cases"]:
        assert row["finite"], row
        # GPU exp (ex2.approx) and FP8 MMA accumulation order differ from the CPU's; 1e-3 is still 10x
        # below the FP8 quantization error itself
        assert row["rel_error_vs_reference"] < 1e-3, row
    assert report["model"]["max_rel_logit_difference"] < 1e-3
    assert report["merge"]["rel_error"] < 1e-5
