"""The default analysis path's speed work: the vectorised, cached tiling search gives the loop's answer."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.methods.solar.bounds import _search_tiling_loop, search_tiling


@settings(max_examples=60, deadline=None)
@given(
    m=st.integers(1, 5000),
    n=st.integers(1, 5000),
    k=st.integers(1, 5000),
    s_words=st.integers(1, 2**22),
)
def test_vectorised_tiling_search_equals_the_loop(m: int, n: int, k: int, s_words: int) -> None:
    assert search_tiling(m, n, k, s_words) == _search_tiling_loop(m, n, k, s_words)


def test_tiling_search_with_no_fitting_tile_and_huge_shapes() -> None:
    assert search_tiling(4, 4, 4, 2) == _search_tiling_loop(4, 4, 4, 2)  # 3 words needed for 1x1x1
    big = 2**22
    assert search_tiling(big, big, big, 2**20) == _search_tiling_loop(big, big, big, 2**20)  # int64 guard
