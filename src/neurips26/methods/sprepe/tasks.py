"""SpRePE's experiment data: each task's data set as a pure function of the config fields it reads.

``SETUP`` builds it once per distinct setting, shared by every system and seed (``neurips26.bench.setup``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from neurips26.bench.experiment import Profile
from neurips26.bench.setup import Setup, SetupContext
from neurips26.methods.sprepe.config import SpRePEExperimentConfig
from neurips26.methods.sprepe.forecasting import ForecastData, prepare_forecast_data
from neurips26.methods.sprepe.shallow_water import load_shallow_water
from neurips26.methods.sprepe.spherical import SphericalDigits, load_angular_pairs, load_spherical_digits

__all__ = ["PAIR_CLASSES", "SETUP", "load_digits", "load_forecast_data", "load_pairs"]


def _digits_settings(config: SpRePEExperimentConfig) -> tuple[Any, ...]:
    return (
        config.split,
        config.grid_height,
        config.grid_width,
        config.n_train,
        config.n_test,
        config.digit_extent_deg,
        config.polar_min_lat,
        config.seam_halfwidth_deg,
        config.max_spin_deg,
        config.data_seed,
    )


def load_digits(config: SpRePEExperimentConfig) -> SphericalDigits:
    """Task A's data set: a pure function of :func:`_digits_settings`."""
    split, height, width, n_train, n_test, extent, polar, seam, spin, seed = _digits_settings(config)
    return load_spherical_digits(
        split=split,
        height=height,
        width=width,
        n_train=n_train,
        n_test=n_test,
        extent_deg=extent,
        polar_min_lat=polar,
        seam_halfwidth=seam,
        max_spin_deg=spin,
        seed=seed,
    )


PAIR_CLASSES = 10  # as many as the digits, so the accuracy metrics share their chance floor


def _pairs_settings(config: SpRePEExperimentConfig) -> tuple[Any, ...]:
    return (
        config.grid_height,
        config.grid_width,
        config.patch_height,
        config.patch_width,
        config.n_train,
        config.n_test,
        config.polar_min_lat,
        config.data_seed,
    )


def load_pairs(config: SpRePEExperimentConfig) -> SphericalDigits:
    """The angular-pairs data set: a pure function of :func:`_pairs_settings`."""
    height, width, patch_height, patch_width, n_train, n_test, polar, seed = _pairs_settings(config)
    return load_angular_pairs(
        height=height,
        width=width,
        patch_height=patch_height,
        patch_width=patch_width,
        n_train=n_train,
        n_test=n_test,
        num_classes=PAIR_CLASSES,
        polar_min_lat=polar,
        seed=seed,
    )


def _forecast_settings(config: SpRePEExperimentConfig) -> tuple[Any, ...]:
    return (
        config.swe_n_train_trajectories,
        config.swe_n_test_trajectories,
        config.swe_snapshots,
        config.grid_height,
        config.grid_width,
        config.swe_interval_hours,
        config.swe_wind_rms,
        config.swe_max_ic_degree,
        config.polar_min_lat,
        config.data_seed,
    )


def load_forecast_data(config: SpRePEExperimentConfig) -> tuple[ForecastData, np.ndarray, np.ndarray]:
    """Task B's trajectories (cached on disk), split and normalised, from :func:`_forecast_settings`."""
    n_train, n_test, snapshots, height, width, hours, wind, degree, polar, seed = _forecast_settings(config)
    trajectories = load_shallow_water(
        n_train + n_test,
        snapshots,
        height=height,
        width=width,
        interval_hours=hours,
        wind_rms=wind,
        max_ic_degree=degree,
        seed=seed,
    )
    data = prepare_forecast_data(
        trajectories.fields, trajectories.lat, trajectories.latitude_weights, n_train, polar
    )
    return data, trajectories.lat, trajectories.lon


# task -> (its data set from the config, the config fields that data set depends on)
TASK_DATA: dict[str, tuple[Callable[[SpRePEExperimentConfig], Any], Callable[..., tuple[Any, ...]]]] = {
    "angular_pairs": (load_pairs, _pairs_settings),
    "digits": (load_digits, _digits_settings),
    "shallow_water": (load_forecast_data, _forecast_settings),
}


def _task_data(config: SpRePEExperimentConfig, profile: Profile, seed: int, context: SetupContext) -> Any:
    """The task's data set, shared by every system and seed with the same data settings."""
    return TASK_DATA[config.task][0](config)


def _task_data_key(config: SpRePEExperimentConfig, profile: Profile, seed: int) -> tuple[Any, ...]:
    return (config.task, *TASK_DATA[config.task][1](config))


SETUP = Setup("data", build=_task_data, key=_task_data_key)
