"""The "estimator" tester passes sklearn's and pyod's own estimators and fails broken ones."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import BaseEstimator, OutlierMixin
from sklearn.linear_model import LinearRegression
from sklearn.utils.validation import check_is_fitted, validate_data

from neurips26.testing.conformance import EstimatorExample, check_estimator_family

X = np.random.default_rng(0).normal(size=(40, 3))
y = X @ np.array([1.0, -2.0, 0.5])


class MeanScorer(OutlierMixin, BaseEstimator):
    """A small pyod-style detector: the score is the distance to the training mean."""

    def __init__(self, contamination: float = 0.1) -> None:
        self.contamination = contamination

    def fit(self, X, y=None):
        X = validate_data(self, X)
        self.mean_ = X.mean(axis=0)
        self.decision_scores_ = self.decision_function(X)
        self.threshold_ = float(np.quantile(self.decision_scores_, 1 - self.contamination))
        self.labels_ = (self.decision_scores_ > self.threshold_).astype(int)
        return self

    def decision_function(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        return np.linalg.norm(X - self.mean_, axis=1)

    def predict(self, X):
        return (self.decision_function(X) > self.threshold_).astype(int)


class ReturnsNone(MeanScorer):
    def fit(self, X, y=None):
        super().fit(X, y)


class RenamesParameter(MeanScorer):
    def __init__(self, contamination: float = 0.1) -> None:
        self.share = contamination  # get_params looks for `contamination` and clone loses it


class InvertedPredict(MeanScorer):
    def predict(self, X):
        return (self.decision_function(X) <= self.threshold_).astype(int)


class PredictsUnfitted(MeanScorer):
    def decision_function(self, X):
        return np.linalg.norm(np.asarray(X) - getattr(self, "mean_", 0.0), axis=1)


def test_sklearn_estimators_pass_the_full_suite() -> None:
    check_estimator_family(lambda: EstimatorExample(LinearRegression(), X, y))


def test_a_pyod_detector_passes_with_a_declared_subset() -> None:
    from pyod.models.iforest import IForest

    example = EstimatorExample(
        IForest(n_estimators=10, random_state=0),
        X,
        sklearn_checks=("check_estimators_fit_returns_self", "check_get_params_invariance"),
        sklearn_reason="pyod's detectors do not follow sklearn's outlier-detector output convention",
    )
    check_estimator_family(lambda: example)


@pytest.mark.parametrize(
    ("cls", "match"),
    [
        (ReturnsNone, "fit must return self"),
        (RenamesParameter, "get_params"),
        (InvertedPredict, r"predict\(X\) must equal"),
        (PredictsUnfitted, "NotFittedError"),
    ],
)
def test_a_broken_detector_fails_naming_the_expectation(cls, match) -> None:
    with pytest.raises(AssertionError, match=match):
        check_estimator_family(
            lambda: EstimatorExample(cls(), X, sklearn_checks=(), sklearn_reason="own checks")
        )


def test_a_subset_without_its_reason_fails() -> None:
    with pytest.raises(AssertionError, match="sklearn_reason"):
        check_estimator_family(
            lambda: EstimatorExample(MeanScorer(), X, sklearn_checks=("check_set_params",))
        )


def test_expected_failures_need_reasons_must_fail_and_must_exist() -> None:
    from sklearn.linear_model import LinearRegression

    def example(expected: dict[str, str]) -> EstimatorExample:
        return EstimatorExample(LinearRegression(), X, y, sklearn_expected_failures=expected)

    with pytest.raises(AssertionError, match="needs its reason"):
        check_estimator_family(lambda: example({"check_fit1d": " "}))
    with pytest.raises(AssertionError, match="does not run here"):
        check_estimator_family(lambda: example({"check_no_such_thing": "typo"}))
    with pytest.raises(AssertionError, match="pass now"):
        check_estimator_family(lambda: example({"check_fit1d": "claimed, but it passes"}))
