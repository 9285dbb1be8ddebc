import json

import numpy as np
import pytest

from neurips26.core.files import atomic_write_json
from neurips26.core.seeding import seed_everything
from neurips26.core.validation import check_choice, check_finite, check_in_range, check_positive


def test_atomic_write_leaves_no_temporary_files(tmp_path) -> None:
    target = atomic_write_json(tmp_path / "a" / "x.json", {"v": 1})
    assert json.loads(target.read_text()) == {"v": 1}
    assert [p.name for p in target.parent.iterdir()] == ["x.json"]


def test_atomic_write_refuses_nan_and_keeps_the_old_file(tmp_path) -> None:
    target = atomic_write_json(tmp_path / "x.json", {"v": 1})
    with pytest.raises(ValueError):
        atomic_write_json(target, {"v": float("nan")})
    assert json.loads(target.read_text()) == {"v": 1}
    assert len(list(tmp_path.iterdir())) == 1


def test_checks_name_the_argument() -> None:
    with pytest.raises(ValueError, match="rho must be finite and >= 0"):
        check_positive("rho", -1.0, allow_zero=True)
    with pytest.raises(TypeError, match="lr must be a number"):
        check_positive("lr", "x")
    with pytest.raises(ValueError, match=r"lat must lie in \[-90, 90\]"):
        check_in_range("lat", 91, -90, 90)
    with pytest.raises(ValueError, match="mode='q' is not allowed"):
        check_choice("mode", "q", ["sh", "xyz"])
    with pytest.raises(ValueError, match="x contains NaN"):
        check_finite("x", np.array([1.0, np.nan]))


def test_seeding_is_reproducible() -> None:
    import torch

    seed_everything(3)
    a = (np.random.rand(), torch.rand(1).item())
    seed_everything(3)
    assert a == (np.random.rand(), torch.rand(1).item())
    with pytest.raises(ValueError):
        seed_everything(-1)
