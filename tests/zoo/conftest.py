from __future__ import annotations

import numpy as np
import pytest
import torch

from neurips26.data.probes import Haystack, key_pool
from neurips26.data.text import stdlib_root
from neurips26.zoo.tokenizer import load_tokenizer
from neurips26.zoo.training import CorpusTokens, newline_mask


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tokenizer():
    return load_tokenizer()


@pytest.fixture(scope="session")
def small_corpus(tokenizer):
    """Two stdlib files tokenized: a stand-in for the held-out split that costs milliseconds."""
    text = (stdlib_root() / "json" / "decoder.py").read_text() + (stdlib_root() / "textwrap.py").read_text()
    mask = newline_mask(tokenizer)
    return CorpusTokens(Haystack(np.asarray(tokenizer.encode(text)), mask), mask, key_pool(tokenizer))


@pytest.fixture
def tiny_llama(tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.eos_token_id,
    )
    return LlamaForCausalLM(config).eval()
