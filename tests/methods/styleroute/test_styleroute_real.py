"""The ``real`` profile's data: the painting loader (configurable root), the pair assignment, the profile."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from neurips26.methods.styleroute import experiment as E
from neurips26.methods.styleroute.data import OPENCV_DATA_ROOT, PAINTINGS, load_style, painting_path
from neurips26.methods.styleroute.training import PRIORS_DIR, source_digest


def _write_wide_jpeg(folder: Path, name: str = "starry_night") -> Path:
    """A 60x40 JPEG: the 10 leftmost and rightmost columns red, the centre 40x40 square blue."""
    from PIL import Image

    pixels = np.zeros((40, 60, 3), np.uint8)
    pixels[:, :, 2] = 255
    pixels[:, :10] = pixels[:, 50:] = (255, 0, 0)
    path = folder / f"{name}.jpg"
    Image.fromarray(pixels).save(path, quality=95)
    return path


def test_painting_is_read_from_the_given_root_and_centre_cropped(tmp_path: Path) -> None:
    _write_wide_jpeg(tmp_path)
    image = load_style("starry_night", 32, root=tmp_path)
    assert image.shape == (32, 32, 3) and image.dtype == np.float32
    assert image.min() >= 0.0 and image.max() <= 1.0
    # the centre square holds only blue (up to JPEG ringing at its edges); a crop from the left edge
    # would hold a quarter of red columns (mean red >= 0.25)
    assert image[..., 0].mean() < 0.05 and image[..., 2].mean() > 0.9


def test_missing_painting_names_the_package_that_installs_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="apt-get install opencv-doc"):
        load_style("starry_night", root=tmp_path)


def test_unknown_painting_or_style_is_refused() -> None:
    with pytest.raises(ValueError, match="painting must be one of"):
        painting_path("mona_lisa")
    with pytest.raises(ValueError, match="starry_night"):
        load_style("mona_lisa")


def test_source_digest_is_the_files_sha256_and_none_for_bundled_styles(tmp_path: Path) -> None:
    path = _write_wide_jpeg(tmp_path)
    assert source_digest("starry_night", tmp_path) == hashlib.sha256(path.read_bytes()).hexdigest()
    assert source_digest("brick") is None


def test_pairs_assign_one_content_and_its_style_per_seed_cyclically() -> None:
    config = E.StyleRouteExperimentConfig(pairs=["coffee/brick", "rocket/starry_night"])
    assert E.seed_assignment(config, 0) == ("brick", ("coffee",))
    assert E.seed_assignment(config, 3) == ("starry_night", ("rocket",))
    plain = E.StyleRouteExperimentConfig()
    assert [E.seed_assignment(plain, s) for s in range(5)] == [E.pair_for_seed(s, 2) for s in range(5)]


@pytest.mark.parametrize("pair", ["coffee", "coffee/gravel", "mona_lisa/brick", "coffee/mona_lisa"])
def test_a_pair_without_a_known_content_or_a_prior_is_refused(pair: str) -> None:
    with pytest.raises(ValueError, match="pairs must hold"):
        E.StyleRouteExperimentConfig(pairs=[pair])


def test_real_profile_runs_default_systems_on_at_least_three_pairs_with_five_seeds() -> None:
    profile = E.EXPERIMENT.profile("real")
    config = E.EXPERIMENT.config_for(profile, {}, {})
    assert len(set(config.pairs)) >= 3 and profile.seeds >= 5
    assert profile.systems == E.EXPERIMENT.profile("default").systems
    sweeps = {len(E.EXPERIMENT.build_system(name, config).sweep) for name in profile.systems}
    assert sweeps == {4}  # equal sweep points per system (issue #43)
    # every pair's style has a committed prior that passed its gate
    for pair in config.pairs:
        card = json.loads((PRIORS_DIR / pair.split("/")[1] / "card.json").read_text())
        assert card["gate"]["passed"]


@pytest.mark.parametrize("painting", PAINTINGS)
def test_committed_painting_prior_names_the_bytes_it_was_trained_on(painting: str) -> None:
    card = json.loads((PRIORS_DIR / painting / "card.json").read_text())
    assert len(card["source_sha256"]) == 64 and card["gate"]["passed"]
    assert set(card["gate"]["swd"]) > {painting, "brick", "halftone"}
    if not Path(OPENCV_DATA_ROOT, f"{painting}.jpg").is_file():
        pytest.skip("opencv-doc is not installed: the painting's bytes cannot be compared")
    assert source_digest(painting) == card["source_sha256"]
