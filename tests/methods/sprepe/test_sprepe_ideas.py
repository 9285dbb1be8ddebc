"""SpRePE's central ideas, each guarded through the public attention block ``SpRePEAttention``.

Each test was checked to fail with its idea cut out of the code (the switch is named in its docstring).
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from neurips26.methods.sprepe import SpRePEAttention, householder_matrix, latlon_to_xyz, sh_reflectors
from neurips26.testing.position_embedding import certify_position_embedding


def _block(dim: int = 32, heads: int = 2, seed: int = 0) -> SpRePEAttention:
    torch.manual_seed(seed)
    return SpRePEAttention(dim, heads, mode="sh", degree=3).double()


def _positions(n: int, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    lat = torch.rand(n, generator=generator, dtype=torch.float64) * 170 - 85
    lon = torch.rand(n, generator=generator, dtype=torch.float64) * 360 - 180
    return lat, lon


def _dense_oracle(block: SpRePEAttention, x: torch.Tensor, xyz: torch.Tensor, reflect: bool) -> torch.Tensor:
    """Attention with q_i, k_i multiplied by the dense block-diagonal reflection of token i's own position."""
    batch, tokens, dim = x.shape
    heads, head_dim = block.num_heads, block.head_dim
    q, k, v = block.qkv(x).view(batch, tokens, 3, heads, head_dim).permute(2, 0, 3, 1, 4)
    if reflect:
        # eq. 2's reflectors of each token's own position, computed here, not by the block
        u = sh_reflectors(xyz, 3, block.position_embedding.degree_logits)  # (N, blocks, block_size)
        per_token = torch.stack([torch.block_diag(*householder_matrix(u[i])) for i in range(tokens)])
        q = torch.einsum("nij,bhnj->bhni", per_token, q)
        k = torch.einsum("nij,bhnj->bhni", per_token, k)
    weights = torch.softmax(q @ k.transpose(-1, -2) / head_dim**0.5, dim=-1)
    return block.proj((weights @ v).transpose(1, 2).reshape(batch, tokens, dim))


def test_idea_attention_reflects_q_and_k_by_each_tokens_own_position() -> None:
    """Idea 1 (eq. 1): in the attention block, q and k of token i are reflected blockwise by H(u(p_i)),
    u a function of p_i alone; equal to a dense-matrix oracle and far from position-free attention.

    Switched off (each made this test fail): ``integration.apply_householder`` as the identity (no
    reflection reaches attention), and ``SpRePE.reflectors`` fed the positions in reversed token order
    (each token reflected by another token's position).
    """
    block = _block()
    lat, lon = _positions(12)
    xyz = latlon_to_xyz(lat, lon)
    x = torch.randn(2, 12, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        out = block(x, lat=lat, lon=lon)
        expected = _dense_oracle(block, x, xyz, reflect=True)
        position_free = _dense_oracle(block, x, xyz, reflect=False)
    assert float((expected - position_free).abs().max()) > 1e-2  # the reflections matter here
    torch.testing.assert_close(out, expected, atol=1e-10, rtol=1e-10)


def test_idea_sh_reflectors_give_the_block_a_rotation_invariant_relative_kernel() -> None:
    """Idea 2 (eq. 2): the attention block's 'sh' reflectors make the relative kernel u_i . u_j a zonal
    function of the geodesic distance: invariant to any rotation of the sphere, continuous across the
    seam and regular at the poles, and the reflection preserves norms.

    Switched off (made this test fail): ``integration.sh_reflectors`` reweighting one harmonic channel
    (then renormalised), which breaks the addition theorem.
    """
    certificate = certify_position_embedding(_block().position_embedding)
    assert certificate.relative_rotation_invariant, certificate
    assert certificate.seam_continuous and certificate.pole_regular, certificate
    assert certificate.norm_preserving, certificate
    assert certificate.antipode_distinguishing, certificate  # not vacuous: positions are seen


class _LargestTensor(TorchDispatchMode):
    """Records the largest number of elements of any tensor an aten op returns."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        for value in out if isinstance(out, tuple | list) else (out,):
            if isinstance(value, torch.Tensor):
                self.largest = max(self.largest, value.numel())
        return out


def test_idea_no_pairwise_tensor_through_the_attention_block(monkeypatch) -> None:
    """Idea 3: the relative term comes from per-token transforms, so the block never builds an N x N
    tensor outside SDPA's fused kernel (O(N d) like RoPE), and SDPA gets no attention mask.

    Switched off (made this test fail): the relative term delivered as a bias, ``SpRePE.attention_bias``
    returning an (H, N, N) tensor (what ``GeodesicBiasPE`` does).
    """
    tokens, dim = 512, 32  # N x N is 5x the largest per-token tensor (qkv)
    block = SpRePEAttention(dim, 2, mode="sh", degree=3)
    lat, lon = _positions(tokens)
    x = torch.randn(1, tokens, dim)
    seen_masks: list[object] = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen_masks.append(kwargs.get("attn_mask"))
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    recorder = _LargestTensor()
    with torch.no_grad(), recorder:
        block(x, lat=lat.float(), lon=lon.float())
    assert seen_masks == [None]
    assert recorder.largest < tokens * tokens // 4, recorder.largest
