"""The dataset loaders read synthetic files written in the CASIA-SURF, CeFA, WMCA and PADISI layouts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn

from neurips26.methods.semfas import SEMFAS
from neurips26.methods.semfas.fas_sensors import render_domain
from neurips26.methods.semfas.loaders import casia_cefa, casia_surf, collate_modalities, padisi, wmca


def _save(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = (np.clip(array, 0, 1) * 255).astype(np.uint8)
    Image.fromarray(image.transpose(1, 2, 0) if image.shape[0] == 3 else image[0]).save(path)


@pytest.fixture(scope="module")
def batch():
    return render_domain("W", 6, seed=1)


def test_casia_surf_layout(tmp_path: Path, batch) -> None:
    lines = []
    for i in range(len(batch)):
        base = f"Training/{'fake' if batch.label[i] else 'real'}_part/CLKJ_{i:04d}/real.rssdk"
        for sub, array in (("color", batch.rgb[i]), ("depth", batch.depth[i]), ("ir", batch.ir[i])):
            _save(tmp_path / f"{base}/{sub}/31.jpg", array)
        lines.append(f"{base}/color/31.jpg {base}/depth/31.jpg {base}/ir/31.jpg {1 - batch.label[i]}")
    (tmp_path / "train_list.txt").write_text("\n".join(lines) + "\n")
    data = casia_surf(tmp_path, tmp_path / "train_list.txt", size=32)
    assert len(data) == len(batch)
    images, label = data[0]
    assert (
        label == batch.label[0] and images["rgb"].shape == (3, 32, 32) and images["ir"].shape == (1, 32, 32)
    )
    assert (images["depth"][0] - torch.from_numpy(batch.depth[0, 0])).abs().mean() < 0.05  # JPEG


def test_cefa_layout_with_a_missing_modality(tmp_path: Path, batch) -> None:
    lines = []
    for i in range(len(batch)):
        video = f"4_{i:03d}_1_1_1"
        _save(tmp_path / f"{video}/profile/0001.jpg", batch.rgb[i])
        _save(tmp_path / f"{video}/depth/0001.jpg", batch.depth[i])
        if i % 2 == 0:
            _save(tmp_path / f"{video}/ir/0001.jpg", batch.ir[i])
        lines.append(f"{video}/profile/0001.jpg {1 - batch.label[i]}")
    (tmp_path / "4@1_train.txt").write_text("\n".join(lines))
    data = casia_cefa(tmp_path, tmp_path / "4@1_train.txt")
    inputs, present, labels = collate_modalities([data[i] for i in range(len(data))])
    assert present[:, 2].tolist() == [i % 2 == 0 for i in range(len(batch))]
    assert labels.tolist() == batch.label.tolist()
    encoders = {
        m: nn.Sequential(nn.Flatten(), nn.Linear(c * 32 * 32, 8))
        for m, c in (("rgb", 3), ("depth", 1), ("ir", 1))
    }
    out = SEMFAS(encoders, dim=4, heads=2, povm_rank=1)(inputs, present)
    assert out.main_effects[~present[:, 2], :, 2].abs().max() == 0


@pytest.mark.parametrize(("loader", "ir_name"), [(wmca, "infrared.png"), (padisi, "nir.png")])
def test_exported_layouts(tmp_path: Path, batch, loader, ir_name: str) -> None:
    rows = ["sample,label"]
    for i in range(len(batch)):
        folder = tmp_path / "test" / f"s{i}"
        _save(folder / "color.png", batch.rgb[i])
        _save(folder / "depth.png", batch.depth[i])
        _save(folder / ir_name, batch.ir[i])
        rows.append(f"s{i},{'attack' if batch.label[i] else 'bonafide'}")
    (tmp_path / "test.csv").write_text("\n".join(rows))
    data = loader(tmp_path, "test")
    assert [data[i][1] for i in range(len(data))] == batch.label.tolist()
    assert data[1][0]["ir"] is not None


def test_loader_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="list file"):
        casia_surf(tmp_path, tmp_path / "missing.txt")
    (tmp_path / "bad.txt").write_text("a b 1\n")
    with pytest.raises(ValueError, match="expected"):
        casia_surf(tmp_path, tmp_path / "bad.txt")
    (tmp_path / "train.csv").write_text("sample,label\ns0,maybe\n")
    with pytest.raises(ValueError, match="bonafide"):
        wmca(tmp_path, "train")
