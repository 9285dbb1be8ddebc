"""transformers' ``PatchTSTForPretraining`` behind the ``TSBackbone`` protocol.

A second, independently written backbone keeps the protocol honest (it is not shaped to ``tiny-tsfm``):
PatchTST (Nie et al., ICLR 2023) is also a channel-independent patch transformer pretrained by masked patch
reconstruction, but it masks by zeroing patch values (its ``mask_value``) rather than with a learned token,
and its projections are named ``q_proj``/``k_proj``/``v_proj``/``out_proj``. Requires ``transformers``.

>>> backbone = PatchTSTBackbone.small(context_length=64)          # doctest: +SKIP
>>> config = STARConfig(target_modules=("q_proj", "v_proj"))        # doctest: +SKIP
>>> model = inject_star(backbone, config, n_numeric=8)              # doctest: +SKIP
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["PatchTSTBackbone"]


class PatchTSTBackbone(nn.Module):
    """Wraps a ``PatchTSTForPretraining`` whose patches do not overlap (stride = patch length).

    Windows must be exactly ``context_length`` steps (PatchTST's positional table has one row per patch).
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        config = model.config
        if config.patch_stride != config.patch_length:
            raise ValueError(
                f"PatchTSTBackbone needs patch_stride == patch_length, got {config.patch_stride} and "
                f"{config.patch_length}"
            )
        if getattr(config, "use_cls_token", False):
            raise ValueError("PatchTSTBackbone needs use_cls_token=False (one hidden state per patch)")
        self.model = model
        self.patch_len = int(config.patch_length)
        self.d_model = int(config.d_model)
        self.n_patches = int(config.context_length) // self.patch_len

    @classmethod
    def small(cls, context_length: int = 64, seed: int = 0) -> PatchTSTBackbone:
        """A randomly initialised small PatchTST (patch 8, d 64, 2 layers), channel independent."""
        from transformers import PatchTSTConfig, PatchTSTForPretraining

        torch.manual_seed(seed)
        config = PatchTSTConfig(
            num_input_channels=1,
            context_length=context_length,
            patch_length=8,
            patch_stride=8,
            d_model=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            ffn_dim=256,
            do_mask_input=False,
            scaling=None,
        )
        return cls(PatchTSTForPretraining(config).eval())

    def patchify(self, series: torch.Tensor) -> torch.Tensor:
        """(batch, channels, length) -> (batch * channels, n_patches, patch_len)."""
        if series.dim() != 3:
            raise ValueError(f"series must be (batch, channels, length), got shape {tuple(series.shape)}")
        b, c, length = series.shape
        if length != self.n_patches * self.patch_len:
            raise ValueError(
                f"PatchTST windows must be context_length={self.n_patches * self.patch_len} steps"
            )
        return series.reshape(b * c, self.n_patches, self.patch_len)

    def embed(self, patches: torch.Tensor) -> torch.Tensor:
        return self.model.model.encoder.embedder(patches[:, None])[:, 0]

    def encode(self, patches: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if mask is not None:  # PatchTST's masking: the masked patches' values are set to mask_value (0)
            patches = patches.masked_fill(mask[..., None], 0.0)
        return self.model.model.encoder(patches[:, None]).last_hidden_state[:, 0]

    def reconstruct(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.model.head(hidden[:, None])[:, 0]

    def forward(self, patches: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.reconstruct(self.encode(patches, mask))

    def adaptable_linears(self) -> dict[str, nn.Linear]:
        """The encoder's attention and feed-forward projections, by name relative to this wrapper."""
        return {
            name: module
            for name, module in self.named_modules()
            if isinstance(module, nn.Linear) and ".layers." in name
        }
