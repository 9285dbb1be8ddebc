"""SpRePE: Spherical Reflection Position Embedding -- nn.Module glue for attention on the sphere.

Every position embedding in this package (SpRePE and the baselines) is a :class:`SphericalPositionEmbedding`
with three hooks, so one attention block and one test kit serve them all:

* ``embed_tokens(x, xyz)`` -- additive absolute embeddings (identity for q/k transforms);
* ``encode(x, xyz)``       -- a per-token transform of queries and keys (identity for additive ones);
* ``attention_bias(xyz_q, xyz_k)`` -- an ``(H, Nq, Nk)`` additive logit bias, or ``None``.

Positions are unit vectors ``xyz`` of shape ``(N, 3)`` (shared by the batch) or ``(B, N, 3)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from neurips26.methods.sprepe.config import SpRePEConfig
from neurips26.methods.sprepe.core import (
    apply_householder,
    default_alpha,
    latlon_to_xyz,
    real_harmonics,
    sh_block_size,
    sh_reflectors,
    validate_xyz,
    xyz_reflectors,
)

__all__ = [
    "PositionalSelfAttention",
    "SpRePE",
    "SpRePEAttention",
    "SphericalPositionEmbedding",
    "resolve_positions",
]


def resolve_positions(
    lat: Tensor | None = None, lon: Tensor | None = None, xyz: Tensor | None = None
) -> Tensor:
    """Unit vectors from either ``(lat, lon)`` in degrees or ``xyz``; exactly one form must be given."""
    if xyz is not None:
        if lat is not None or lon is not None:
            raise ValueError("give positions either as lat/lon (degrees) or as xyz unit vectors, not both")
        return validate_xyz(xyz)
    if lat is None or lon is None:
        raise ValueError(
            "positions missing: pass lat and lon (degrees) or xyz (unit vectors of shape (..., 3))"
        )
    return latlon_to_xyz(lat, lon)


def check_positions_match(x: Tensor, xyz: Tensor, name: str) -> None:
    """Raise if the token axis of ``x`` (dim -2) or its batch disagrees with the positions ``xyz``."""
    if x.ndim < 2:
        raise ValueError(f"{name} must have shape (..., N, head_dim), got {tuple(x.shape)}")
    if xyz.ndim not in (2, 3):
        raise ValueError(f"positions must have shape (N, 3) or (B, N, 3), got {tuple(xyz.shape)}")
    if x.shape[-2] != xyz.shape[-2]:
        raise ValueError(
            f"{name} has {x.shape[-2]} tokens (shape {tuple(x.shape)}) "
            f"but {xyz.shape[-2]} positions were given"
        )
    if xyz.ndim == 3 and (x.ndim < 3 or x.shape[0] != xyz.shape[0]):
        raise ValueError(
            f"positions have batch size {xyz.shape[0]} (shape {tuple(xyz.shape)}) "
            f"but {name} has shape {tuple(x.shape)}"
        )


def align_to(per_token: Tensor, x: Tensor, trailing: int) -> Tensor:
    """Insert head axes so a per-token tensor ``(B, N, *t)`` broadcasts against ``x`` ``(B, H, N, D)``."""
    batched = per_token.ndim - trailing == 2
    if batched and x.ndim == 4:
        return per_token.unsqueeze(1)
    return per_token


class SphericalPositionEmbedding(nn.Module):
    """Base class: the three hooks through which attention sees a spherical position embedding.

    Subclasses set ``dim`` (the feature size their hooks expect) and ``transforms_qk``.
    """

    dim: int
    transforms_qk: bool = False

    def embed_tokens(self, x: Tensor, xyz: Tensor) -> Tensor:
        """Add an absolute embedding to token features ``(..., N, dim)`` (identity by default)."""
        return x

    def encode(self, x: Tensor, xyz: Tensor) -> Tensor:
        """Transform queries or keys ``(..., N, head_dim)`` by their own positions (identity by default)."""
        return x

    def attention_bias(self, xyz_q: Tensor, xyz_k: Tensor) -> Tensor | None:
        """An additive ``(H, Nq, Nk)`` (or ``(B, H, Nq, Nk)``) logit bias, or ``None`` (the default)."""
        return None


class SpRePE(SphericalPositionEmbedding):
    """SpRePE: Spherical Reflection Position Embedding, a drop-in q/k transform for attention on S^2.

    Each block of ``n`` channels of a query or key at p is reflected, ``x - 2 u(p) (u(p)^T x)``, with a
    reflector map ``u`` of the token's own absolute position; the attention logit then holds the relative
    kernel ``u_i . u_j`` (see :mod:`neurips26.methods.sprepe.core`, eqs. 1-3). Cost O(N d), no N x N tensor.

    Parameters
    ----------
    head_dim : int
        Channels per attention head.
    mode : {"sh", "xyz"}, default "sh"
        ``"sh"``: u = [sqrt(w_l) Y_l(p)]_{l<=degree}, blocks of (degree+1)^2 channels, relative kernel
        sum_l w_l P_l(cos gamma). ``"xyz"``: u = (cos a_b, sin a_b p), blocks of 4 channels (3 without the
        constant), relative rotation by twice the angle between reflectors.
    degree : int, default 3
        Highest spherical-harmonic degree L of ``"sh"`` blocks (ours: 16-channel blocks divide 32/48/64).
    num_blocks : int or None
        Blocks per head; by default ``head_dim // block_size``, which must then divide exactly.
        With an explicit value the channels beyond ``num_blocks * block_size`` pass through unchanged.
    include_constant : bool, default True
        ``"xyz"`` only: keep the constant channel; without it antipodal points get the same encoding.
    learnable : bool, default True
        Learn the degree weights w (``"sh"``) or the angles a (``"xyz"``); otherwise keep them as buffers.

    Shapes: ``encode_qk(q, k, lat, lon)`` with ``q``, ``k`` ``(..., N, head_dim)`` (e.g.
    ``(B, H, N, head_dim)``) and ``lat``, ``lon`` ``(N,)`` or ``(B, N)`` degrees; or ``xyz=`` unit
    vectors ``(N, 3)`` / ``(B, N, 3)``.
    """

    transforms_qk = True

    def __init__(
        self,
        head_dim: int,
        mode: str = "sh",
        degree: int = 3,
        num_blocks: int | None = None,
        include_constant: bool = True,
        learnable: bool = True,
    ) -> None:
        super().__init__()
        if mode not in ("sh", "xyz"):
            raise ValueError(f"mode={mode!r} is not allowed; choose 'sh' or 'xyz'")
        if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < 1:
            raise ValueError(f"head_dim must be a positive integer, got {head_dim!r}")
        if isinstance(degree, bool) or not isinstance(degree, int) or degree < 0:
            raise ValueError(f"degree must be an integer >= 0, got {degree!r}")
        self.mode = mode
        self.degree = degree
        self.include_constant = include_constant
        self.dim = head_dim
        self.head_dim = head_dim
        self.block_size = block = self.layout_block_size(mode, degree, include_constant)
        self.num_blocks = self.resolve_num_blocks(head_dim, block, num_blocks)
        if mode == "sh":
            logits = self.initial_degree_logits(self.num_blocks, degree)
            self.register_learnable("degree_logits", logits, learnable)
        elif include_constant:
            alpha = default_alpha(self.num_blocks)
            self.register_learnable("alpha", alpha, learnable)

    @classmethod
    def from_config(cls, head_dim: int, config: SpRePEConfig) -> SpRePE:
        """``SpRePE`` with its settings from a :class:`SpRePEConfig`."""
        if not isinstance(config, SpRePEConfig):
            raise TypeError(f"config must be a SpRePEConfig, got {type(config).__name__}")
        return cls(
            head_dim,
            mode=config.mode,
            degree=config.degree,
            include_constant=config.include_constant,
            learnable=config.learnable,
        )

    def register_learnable(self, name: str, value: Tensor, learnable: bool) -> None:
        """Keep ``value`` as a trained parameter or, with ``learnable=False``, as a saved buffer."""
        if learnable:
            self.register_parameter(name, nn.Parameter(value))
        else:
            self.register_buffer(name, value)

    @staticmethod
    def layout_block_size(mode: str, degree: int, include_constant: bool) -> int:
        """Channels per block: (degree + 1)^2 for 'sh'; 4 for 'xyz' (3 without the constant)."""
        if mode == "sh":
            return sh_block_size(degree)
        return 4 if include_constant else 3

    def resolve_num_blocks(self, head_dim: int, block: int, num_blocks: int | None) -> int:
        """Blocks per head for this layout; raise when ``head_dim`` cannot hold them."""
        layout = f"mode={self.mode!r}" + (f", degree={self.degree}" if self.mode == "sh" else "")
        if num_blocks is None:
            if head_dim % block != 0:
                raise ValueError(
                    f"head_dim={head_dim} is incompatible with the {layout} block layout: blocks have "
                    f"{block} channels, so head_dim must be a multiple of {block} (or pass "
                    f"num_blocks <= {head_dim // block} to leave the remaining channels unrotated)"
                )
            return head_dim // block
        if isinstance(num_blocks, bool) or not isinstance(num_blocks, int) or num_blocks < 1:
            raise ValueError(f"num_blocks must be a positive integer or None, got {num_blocks!r}")
        if num_blocks * block > head_dim:
            raise ValueError(
                f"num_blocks={num_blocks} blocks of {block} channels ({layout}) need {num_blocks * block} "
                f"channels but head_dim={head_dim}; allowed: num_blocks <= {head_dim // block}"
            )
        return num_blocks

    @staticmethod
    def initial_degree_logits(num_blocks: int, degree: int) -> Tensor:
        """Blocks start favouring different degrees (centres spread over 0..L): they see different scales."""
        centres = torch.linspace(0.0, float(degree), num_blocks)
        degrees = torch.arange(degree + 1, dtype=torch.float32)
        return -(degrees[None, :] - centres[:, None]).abs()

    def degree_weights(self) -> Tensor:
        """The kernel weights w_b = softmax(logits_b), shape ``(num_blocks, degree + 1)`` ('sh' mode)."""
        if self.mode != "sh":
            raise ValueError("degree_weights() exists only for mode='sh'")
        return torch.softmax(self.degree_logits, dim=-1)

    def reflectors(self, xyz: Tensor) -> Tensor:
        """Unit reflectors u_b(p) for positions ``(..., N, 3)`` -> ``(..., N, num_blocks, block_size)``."""
        if self.mode == "sh":
            return sh_reflectors(xyz, self.degree, self.degree_logits, self.cached_harmonics(xyz))
        alpha = self.alpha if self.include_constant else None
        u = xyz_reflectors(xyz, alpha)
        return u.expand(*u.shape[:-2], self.num_blocks, u.shape[-1])

    def cached_harmonics(self, xyz: Tensor) -> Tensor:
        """Y_l(xyz), reused while the *same* position tensor comes back unchanged (a ViT's fixed token grid).

        The cache is keyed on tensor identity and its in-place version counter, never on addresses, and
        is skipped when positions require gradients.
        """
        if xyz.requires_grad:
            return real_harmonics(xyz, self.degree)
        cached = getattr(self, "_harmonics_cache", None)
        if cached is not None and cached[0] is xyz and cached[1] == xyz._version:
            return cached[2]
        harmonics = real_harmonics(xyz, self.degree)
        self._harmonics_cache = (xyz, xyz._version, harmonics)
        return harmonics

    def encode(self, x: Tensor, xyz: Tensor) -> Tensor:
        """Reflect queries or keys ``(..., N, head_dim)`` at positions ``xyz`` ``(N, 3)`` or ``(B, N, 3)``."""
        if x.shape[-1] != self.head_dim:
            raise ValueError(f"expected last dimension head_dim={self.head_dim}, got shape {tuple(x.shape)}")
        check_positions_match(x, xyz, "x")
        u = self.reflectors(xyz.to(x.dtype))
        return apply_householder(x, align_to(u, x, trailing=2))

    def encode_qk(
        self,
        q: Tensor,
        k: Tensor,
        lat: Tensor | None = None,
        lon: Tensor | None = None,
        *,
        xyz: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Encode queries and keys at the same token positions; returns ``(H(u) q, H(u) k)``.

        Not named ``apply``: that would shadow ``nn.Module.apply(fn)``, which ``model.apply(init_fn)``
        calls on every submodule of a model holding this embedding.
        """
        positions = resolve_positions(lat, lon, xyz)
        for name, tensor in (("q", q), ("k", k)):
            if tensor.shape[-1] != self.head_dim:
                raise ValueError(
                    f"{name} has last dimension {tensor.shape[-1]} (shape {tuple(tensor.shape)}) "
                    f"but head_dim={self.head_dim}"
                )
            check_positions_match(tensor, positions, name)
        u = self.reflectors(positions.to(q.dtype))  # one table serves q and k
        return apply_householder(q, align_to(u, q, trailing=2)), apply_householder(
            k, align_to(u, k, trailing=2)
        )

    def extra_repr(self) -> str:
        return (
            f"head_dim={self.head_dim}, mode={self.mode!r}, degree={self.degree}, "
            f"num_blocks={self.num_blocks}, block_size={self.block_size}"
        )


class PositionalSelfAttention(nn.Module):
    """Multi-head self-attention on the sphere through a :class:`SphericalPositionEmbedding`'s hooks.

    Uses ``torch.nn.functional.scaled_dot_product_attention``; q/k transforms keep its fused kernels, and a
    bias-type embedding is passed as ``attn_mask`` (materialising ``(H, N, N)``).
    Input ``x`` ``(B, N, dim)``, positions ``xyz`` ``(N, 3)`` or ``(B, N, 3)``; output ``(B, N, dim)``.
    """

    def __init__(
        self, dim: int, num_heads: int, position_embedding: SphericalPositionEmbedding, qkv_bias: bool = True
    ):
        super().__init__()
        if num_heads < 1 or dim % num_heads != 0:
            raise ValueError(f"dim={dim} must be a positive multiple of num_heads={num_heads}")
        self.dim = dim
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.position_embedding = position_embedding

    def forward(self, x: Tensor, xyz: Tensor) -> Tensor:
        if x.ndim != 3 or x.shape[-1] != self.dim:
            raise ValueError(f"x must have shape (B, N, {self.dim}), got {tuple(x.shape)}")
        check_positions_match(x, xyz, "x")
        batch, tokens, _ = x.shape
        qkv = self.qkv(x).view(batch, tokens, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # each (B, H, N, head_dim)
        pe = self.position_embedding
        q, k = pe.encode(q, xyz), pe.encode(k, xyz)
        bias = pe.attention_bias(xyz, xyz)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return self.proj(out.transpose(1, 2).reshape(batch, tokens, self.dim))


class SpRePEAttention(PositionalSelfAttention):
    """SpRePE: Spherical Reflection Position Embedding inside a ready multi-head SDPA attention block.

    ``forward(x, lat=None, lon=None, xyz=None)`` with ``x`` ``(B, N, dim)``; positions as in :class:`SpRePE`.
    Extra keyword arguments (``mode``, ``degree``, ``num_blocks``, ...) go to :class:`SpRePE`.
    """

    def __init__(
        self, dim: int, num_heads: int, mode: str = "sh", qkv_bias: bool = True, **sprepe_kwargs: object
    ):
        if num_heads < 1 or dim % num_heads != 0:
            raise ValueError(f"dim={dim} must be a positive multiple of num_heads={num_heads}")
        super().__init__(dim, num_heads, SpRePE(dim // num_heads, mode=mode, **sprepe_kwargs), qkv_bias)

    def forward(  # type: ignore[override]
        self, x: Tensor, lat: Tensor | None = None, lon: Tensor | None = None, xyz: Tensor | None = None
    ) -> Tensor:
        return super().forward(x, resolve_positions(lat, lon, xyz).to(x.dtype))
