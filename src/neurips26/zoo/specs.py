"""The zoo's model definitions: architecture (a ``transformers`` config) plus a training recipe.

Each entry uses the exact ``transformers`` class real users run (``LlamaForCausalLM``,
``DeepseekV3ForCausalLM``, ``Qwen3ForCausalLM``), so method code written against the tiny model runs
unchanged on Llama-3.1-8B or DeepSeek-V3 loaded from a local path.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from neurips26.core.config import param

__all__ = ["MODEL_SPECS", "ModelSpec", "Phase", "TrainConfig", "get_spec", "known_names"]


MIXTURE_KINDS = ("text", "repeat", "randrep", "randmqar", "kv", "passkey", "mqar")


def _check_mixture(owner: str, mixture: dict[str, float]) -> None:
    unknown = set(mixture) - set(MIXTURE_KINDS)
    if unknown or not mixture or any(v < 0 for v in mixture.values()) or sum(mixture.values()) <= 0:
        raise ValueError(
            f"{owner} must map some of {'/'.join(MIXTURE_KINDS)} to weights >= 0 (not all 0), got {mixture!r}"
        )


@dataclass(frozen=True)
class Phase:
    """One stage of the curriculum: ``steps`` optimizer steps of ``batch`` x ``seq_len`` tokens.

    ``mixture`` (optional) replaces the recipe's mixture during this phase; ``randrep_alphabet`` (optional)
    draws this phase's ``randrep`` tokens from a fixed set of that many tokens and ``randrep_max_period``
    caps their period (an induction-first curriculum: small alphabet, short periods, then the full vocab).
    """

    seq_len: int
    batch: int
    steps: int
    mixture: dict[str, float] | None = None
    randrep_alphabet: int | None = None
    randrep_max_period: int | None = None

    def __post_init__(self) -> None:
        for name in ("seq_len", "batch", "steps"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"Phase.{name} must be a positive int, got {value!r}")
        if self.mixture is not None:
            _check_mixture("Phase.mixture", self.mixture)
        alphabet, cap = self.randrep_alphabet, self.randrep_max_period
        if alphabet is not None and (not isinstance(alphabet, int) or alphabet < 2):
            raise ValueError(f"Phase.randrep_alphabet must be an int >= 2 or None, got {alphabet!r}")
        if cap is not None and (not isinstance(cap, int) or not 2 <= cap <= self.seq_len // 2):
            raise ValueError(f"Phase.randrep_max_period must be None or in [2, seq_len/2], got {cap!r}")


def _default_phases() -> list[Phase]:
    return [Phase(128, 8, 2000), Phase(512, 4, 150), Phase(1024, 2, 100), Phase(2048, 1, 80)]


@dataclass
class TrainConfig:
    """Training recipe shared by the zoo models (all fields are JSON-serialisable)."""

    seed: int = param(0, "ours: fixed seed; the checkpoint is a pure function of this config")
    # param() returns a dataclasses.field with a default_factory for lists/dicts, which RUF009 cannot see.
    phases: list[dict[str, int]] = param(
        [dataclasses.asdict(p) for p in _default_phases()],
        "ours: retrieval circuits need many optimizer steps, not many tokens: most steps are short and "
        "cheap; then 512-2048 tokens so retrieval holds at 2k",
    )
    learning_rate: float = param(2e-3, "ours: high LR suits a 3M-parameter model trained for ~2k steps")
    min_lr_ratio: float = param(0.1, "ours: cosine decay to 10% of the peak")
    warmup_steps: int = param(50, "ours: ~2% of the steps")
    weight_decay: float = param(0.1, "common LLM practice (Llama 2 paper, Sec. 2.2)")
    beta1: float = param(0.9, "Llama 2 paper, Sec. 2.2")
    beta2: float = param(0.95, "Llama 2 paper, Sec. 2.2")
    grad_clip: float = param(1.0, "Llama 2 paper, Sec. 2.2")
    mixture: dict[str, float] = param(
        {"text": 0.2, "repeat": 0.2, "kv": 0.25, "passkey": 0.1, "mqar": 0.25},
        "ours: probes and repeated chunks (the induction-head signal) dominate so retrieval heads can form "
        "within the compute budget; text keeps a language model",
    )
    answer_weight: float = param(4.0, "ours: extra loss weight on probe answer tokens (sparse signal)")
    max_bindings: int = param(8, "ours: key->value probes hold 1..8 bindings during training")

    def __post_init__(self) -> None:
        if not self.phases:
            raise ValueError("TrainConfig.phases must hold at least one phase")
        for p in self.phases:
            Phase(**p)
        _check_mixture("TrainConfig.mixture", self.mixture)
        if not 0 < self.learning_rate < 1:
            raise ValueError(f"TrainConfig.learning_rate must be in (0, 1), got {self.learning_rate!r}")

    @property
    def total_steps(self) -> int:
        return sum(p["steps"] for p in self.phases)


@dataclass(frozen=True)
class ModelSpec:
    """A zoo entry: the ``transformers`` model class name, its config kwargs and a training recipe."""

    name: str
    architecture: str  # transformers class name
    model_config: dict[str, Any]
    description: str
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)

    def build_config(self, vocab_size: int, eos_token_id: int) -> Any:
        import transformers

        config_cls = getattr(transformers, self.architecture.replace("ForCausalLM", "Config"))
        return config_cls(
            vocab_size=vocab_size,
            bos_token_id=eos_token_id,
            eos_token_id=eos_token_id,
            pad_token_id=eos_token_id,
            **self.model_config,
        )


def _short_recipe() -> TrainConfig:
    """ours: a shorter first phase than tiny-llama's, to fit the shared machine's time budget."""
    return TrainConfig(
        phases=[
            {"seq_len": 128, "batch": 8, "steps": 1000},
            {"seq_len": 512, "batch": 4, "steps": 100},
            {"seq_len": 1024, "batch": 2, "steps": 50},
            {"seq_len": 2048, "batch": 1, "steps": 40},
        ]
    )


_COMMON = {
    "hidden_size": 256,
    "intermediate_size": 688,
    "num_hidden_layers": 4,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": True,
    "rms_norm_eps": 1e-6,
}

MODEL_SPECS: dict[str, ModelSpec] = {
    "tiny-llama": ModelSpec(
        name="tiny-llama",
        architecture="LlamaForCausalLM",
        model_config={**_COMMON, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64},
        description="Llama with GQA (4 query / 2 KV heads, head_dim 64), RoPE, 4 layers, d=256",
    ),
    "tiny-mla": ModelSpec(
        name="tiny-mla",
        architecture="DeepseekV3ForCausalLM",
        model_config={
            **_COMMON,
            "num_attention_heads": 4,
            "num_key_value_heads": 4,
            "q_lora_rank": None,
            "kv_lora_rank": 64,
            "qk_rope_head_dim": 16,
            "qk_nope_head_dim": 32,
            "v_head_dim": 32,
            "first_k_dense_replace": 4,  # all 4 layers dense: MLA attention without MoE
            "n_routed_experts": 4,
            "num_experts_per_tok": 2,
            "n_group": 1,
            "topk_group": 1,
            "moe_intermediate_size": 64,
            "rope_interleave": True,
        },
        description="DeepSeek-V3 MLA (kv_lora_rank 64, decoupled RoPE dim 16), 4 heads, 4 dense layers, "
        "d=256",
        train=_short_recipe(),
    ),
    "tiny-qwen3": ModelSpec(
        name="tiny-qwen3",
        architecture="Qwen3ForCausalLM",
        model_config={**_COMMON, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64},
        description="Qwen3 (QK-norm) with GQA (4 query / 2 KV heads), 4 layers, d=256",
        train=_short_recipe(),
    ),
}

# Issue #20 (zoo v2): models trained from a written induction circuit (neurips26.zoo.circuits / ctx).
_CTX_COMMON = {
    **_COMMON,
    "tie_word_embeddings": False,  # ours: the circuit's copy output is read by its own output block
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 128,  # Llama-3 / Qwen3 head size: enough slow RoPE pairs for content matching
    "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"},  # Llama-3's base
}


def _ctx_recipe() -> TrainConfig:
    """ours: ~20 minutes on one shared thread; probes from step 0, mostly short (cheap) sequences."""
    return TrainConfig(
        phases=[
            {"seq_len": 256, "batch": 8, "steps": 300},
            {"seq_len": 512, "batch": 4, "steps": 60},
            {"seq_len": 2048, "batch": 1, "steps": 20},
        ],
        warmup_steps=30,
        mixture={"text": 0.3, "repeat": 0.1, "kv": 0.35, "passkey": 0.1, "mqar": 0.15},
    )


MODEL_SPECS["tiny-llama-ctx"] = ModelSpec(
    name="tiny-llama-ctx",
    architecture="LlamaForCausalLM",
    model_config=dict(_CTX_COMMON),
    description="Llama with GQA (4 query / 2 KV heads, head_dim 128, RoPE base 5e5), 4 layers, d=256, "
    "untied embeddings, trained from a written previous-token + 3-gram induction circuit",
    train=_ctx_recipe(),
)

MODEL_SPECS["tiny-qwen3-ctx"] = ModelSpec(
    name="tiny-qwen3-ctx",
    architecture="Qwen3ForCausalLM",
    model_config=dict(_CTX_COMMON),
    description="Qwen3 (QK-norm) with GQA (4 query / 2 KV heads, head_dim 128, RoPE base 5e5), 4 layers, "
    "d=256, untied embeddings, trained from a written previous-token + 3-gram induction circuit",
    train=_ctx_recipe(),
)

MODEL_SPECS["tiny-mla-ctx"] = ModelSpec(
    name="tiny-mla-ctx",
    architecture="DeepseekV3ForCausalLM",
    model_config={
        **_COMMON,
        "tie_word_embeddings": False,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "q_lora_rank": None,
        "kv_lora_rank": 96,  # ours: token code (48) + 3 match features of 16 for the circuit's keys
        "qk_rope_head_dim": 32,  # ours: 16 dims (tiny-mla) give no sharp positional pattern (margin 0.01)
        "qk_nope_head_dim": 48,
        "v_head_dim": 48,
        "first_k_dense_replace": 4,  # all 4 layers dense: MLA attention without MoE
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "n_group": 1,
        "topk_group": 1,
        "moe_intermediate_size": 64,
        "rope_interleave": True,
    },
    description="DeepSeek-V3 MLA (kv_lora_rank 96, decoupled RoPE dim 32, nope 48, v 48), 4 heads, 4 dense "
    "layers, d=256, untied embeddings, trained from a written previous-token + 3-gram induction circuit",
    train=_ctx_recipe(),
)


def known_names() -> list[str]:
    return list(MODEL_SPECS)


def get_spec(name: str) -> ModelSpec:
    """The spec of ``name``; an unknown name raises ``ValueError`` listing the known ones."""
    if name not in MODEL_SPECS:
        raise ValueError(f"unknown zoo model {name!r}; known models: {', '.join(known_names())}")
    return MODEL_SPECS[name]
