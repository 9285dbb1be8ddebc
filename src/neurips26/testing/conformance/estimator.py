"""The ``"estimator"`` family: scikit-learn's estimator contract, and pyod's detector contract on top.

Always checked on the example's data: ``get_params``/``set_params`` round trip, ``clone`` gives an
unfitted twin with equal parameters, an unfitted estimator raises ``NotFittedError``, ``fit`` returns
``self``. For a pyod detector (``decision_function`` and, after ``fit``, ``threshold_``): score and label
shapes, labels in {0, 1}, ``labels_ == decision_scores_ > threshold_`` and
``predict(X) == decision_function(X) > threshold_``.

Then scikit-learn's own ``check_estimator`` suite: all of it, or the subset an example declares with
the reason the rest does not apply (e.g. a time-series detector cannot take sklearn's 20-row toy data).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neurips26.testing.conformance._common import expectation

FAMILY = "estimator"
_PREDICTING = ("predict", "decision_function", "transform", "score_samples")


@dataclass
class EstimatorExample:
    """A tiny unfitted estimator, data it accepts, and which of sklearn's checks apply.

    ``sklearn_checks=None`` runs every check of ``check_estimator``; a tuple of check names runs only
    those and needs ``sklearn_reason`` (one sentence: why the others do not apply). ``sklearn_expected_
    failures`` maps checks that do not apply to the reason each (sklearn's ``expected_failed_checks``);
    such a check must still fail, so a stale entry is noticed.
    """

    estimator: Any
    X: Any
    y: Any = None
    sklearn_checks: tuple[str, ...] | None = None
    sklearn_reason: str = ""
    sklearn_expected_failures: dict[str, str] = field(default_factory=dict)


def check_estimator_family(factory: Callable[[], EstimatorExample]) -> None:
    """Raise ``AssertionError`` where ``factory()``'s estimator breaks the sklearn/pyod contract."""
    example = factory()
    if not isinstance(example, EstimatorExample):
        raise expectation(FAMILY, f"the factory must return an EstimatorExample, got {example!r}")
    _check_params_and_clone(example.estimator)
    _check_unfitted(example)
    fitted = _check_fit_returns_self(example)
    if hasattr(fitted, "decision_function") and hasattr(fitted, "threshold_"):
        _check_pyod_detector(fitted, example.X)
    _run_sklearn_checks(example)


def _check_params_and_clone(estimator: Any) -> None:
    from sklearn.base import clone

    try:
        params = estimator.get_params()
        returned = estimator.set_params(**params)
        twin = clone(estimator)
    except Exception as error:
        raise expectation(FAMILY, "get_params / set_params(**get_params()) / clone failed", error) from error
    if returned is not estimator:
        raise expectation(FAMILY, "set_params must return the estimator itself")
    if set(twin.get_params(deep=False)) != set(estimator.get_params(deep=False)):
        raise expectation(FAMILY, "clone(estimator) has other parameters than the estimator")
    fitted_attributes = sorted(k for k in vars(twin) if k.endswith("_") and not k.startswith("_"))
    if fitted_attributes:
        raise expectation(FAMILY, f"a clone must be unfitted, but it has {fitted_attributes}")


def _check_unfitted(example: EstimatorExample) -> None:
    from sklearn.base import clone
    from sklearn.exceptions import NotFittedError

    fresh = clone(example.estimator)
    for name in _PREDICTING:
        if not hasattr(fresh, name):
            continue
        try:
            getattr(fresh, name)(example.X)
        except NotFittedError:
            continue
        except Exception as error:
            raise expectation(FAMILY, f"unfitted {name}() must raise NotFittedError", error) from error
        raise expectation(FAMILY, f"unfitted {name}() must raise NotFittedError, it returned")


def _check_fit_returns_self(example: EstimatorExample) -> Any:
    from sklearn.base import clone

    estimator = clone(example.estimator)
    try:
        returned = estimator.fit(example.X) if example.y is None else estimator.fit(example.X, example.y)
    except Exception as error:
        raise expectation(FAMILY, "fit on the example's data failed", error) from error
    if returned is not estimator:
        raise expectation(FAMILY, "fit must return self")
    return estimator


def _check_pyod_detector(detector: Any, X: Any) -> None:
    n = len(X)
    scores = np.asarray(detector.decision_function(X))
    threshold = detector.threshold_
    if scores.shape != (n,):
        raise expectation(FAMILY, f"decision_function(X) must have shape ({n},), got {scores.shape}")
    if not np.isscalar(threshold) or not np.isfinite(threshold):
        raise expectation(FAMILY, f"threshold_ must be a finite number, got {threshold!r}")
    labels = np.asarray(detector.labels_)
    if labels.shape != (n,) or not set(np.unique(labels)) <= {0, 1}:
        raise expectation(
            FAMILY, f"labels_ must be ({n},) zeros and ones, got {labels.shape} {np.unique(labels)}"
        )
    training_scores = np.asarray(detector.decision_scores_)
    if not np.array_equal(labels, (training_scores > threshold).astype(int)):
        raise expectation(FAMILY, "labels_ must equal decision_scores_ > threshold_")
    predicted = np.asarray(detector.predict(X))
    if not np.array_equal(predicted, (scores > threshold).astype(int)):
        raise expectation(FAMILY, "predict(X) must equal decision_function(X) > threshold_")


def _check_name(check: Callable) -> str:
    return check.func.__name__ if isinstance(check, functools.partial) else check.__name__


def _run_sklearn_checks(example: EstimatorExample) -> None:
    from sklearn.utils.estimator_checks import estimator_checks_generator

    wanted, expected = example.sklearn_checks, example.sklearn_expected_failures
    if wanted is not None and not example.sklearn_reason:
        raise expectation(FAMILY, "a declared subset of sklearn checks needs sklearn_reason (why not all)")
    if any(not str(reason).strip() for reason in expected.values()):
        raise expectation(FAMILY, "every entry of sklearn_expected_failures needs its reason")
    pairs = list(estimator_checks_generator(example.estimator))
    unknown = sorted({*(wanted or ()), *expected} - {_check_name(check) for _, check in pairs})
    if unknown:
        raise expectation(FAMILY, f"the example names checks sklearn does not run here: {unknown}")
    failed: set[str] = set()
    for estimator, check in pairs:
        name = _check_name(check)
        if wanted is not None and name not in wanted:
            continue
        error = _run_check(check, estimator)
        if error is not None and name not in expected:
            raise expectation(FAMILY, f"sklearn's {name} failed", error) from error
        if error is not None:
            failed.add(name)
    stale = sorted(set(expected) - failed)
    if stale:
        raise expectation(FAMILY, f"{stale} pass now: remove them from sklearn_expected_failures")


def _run_check(check: Callable, estimator: Any) -> Exception | None:
    """The error ``check(estimator)`` raised (None when it passed or sklearn skipped it)."""
    try:
        check(estimator)
    except Exception as error:  # sklearn's checks raise assorted types
        return None if type(error).__name__ == "SkipTest" else error
    return None
