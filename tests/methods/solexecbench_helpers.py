"""Shared settings of the solexecbench tests (one copy; each test file adds what it changes)."""

from __future__ import annotations

# A fast evaluation: two correctness rounds, a handful of timed reps, a small cache flush. Timing-sensitive
# assertions are not made at these settings; they check statuses, traces and verdicts.
FAST = dict(
    correctness_rounds=2,
    warmup=1,
    min_reps=5,
    max_reps=6,
    time_budget_s=0.01,
    flush_bytes=2**20,
    timeout_s=30.0,
)
