"""JAX programs (functions plus example inputs) with hand MAC formulas; needs ``jax``.

Each entry: ``name``, ``fn``, ``inputs()`` (a list of arrays) and ``macs``. Loops are where XLA's
``cost_analysis`` undercounts: it counts a ``scan`` or ``while`` body once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

NAMES = (
    "jax_mlp",
    "jax_cnn",
    "jax_attention",
    "jax_scan_rnn",
    "jax_while_solver",
    "jax_mpc_rollout",
)
"""The program names, known without importing jax (config validation uses them)."""


def programs() -> list[dict[str, Any]]:
    """Build the JAX program list (imports jax lazily)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    rng = np.random.default_rng(0)

    def rand(*shape: int, scale: float = 1.0) -> Any:  # numpy draws: jax.random compiles kernels (slow)
        return jnp.asarray((scale * rng.standard_normal(shape)).astype(np.float32))

    def mlp(x: Any, w1: Any, w2: Any) -> Any:
        return jax.nn.relu(x @ w1) @ w2

    def cnn(img: Any, k: Any) -> Any:  # NCHW, OIHW, SAME padding
        y = lax.conv_general_dilated(img, k, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return jax.nn.relu(y).mean(axis=(2, 3))

    def attention(x: Any, wq: Any, wk: Any, wv: Any) -> Any:
        q, k, v = x @ wq, x @ wk, x @ wv
        s = jnp.einsum("td,sd->ts", q, k) / jnp.sqrt(q.shape[-1])
        return jnp.einsum("ts,sd->td", jax.nn.softmax(s, axis=-1), v)

    def rnn(xs: Any, w: Any) -> Any:
        def step(h: Any, x: Any) -> tuple[Any, Any]:
            h = jnp.tanh(h @ w + x)
            return h, h

        return lax.scan(step, jnp.zeros(xs.shape[1:]), xs)[0]

    def solver(a: Any, x: Any) -> Any:  # fixed-point iteration x <- A x until 12 trips
        def cond(c: Any) -> Any:
            return c[1] < 12

        def body(c: Any) -> Any:
            return (0.5 * jnp.tanh(c[0] @ a), c[1] + 1)

        return lax.while_loop(cond, body, (x, 0))[0]

    def mpc(x0: Any, us: Any, a: Any, b: Any) -> Any:
        def step(x: Any, u: Any) -> tuple[Any, Any]:
            x = x @ a.T + u @ b.T
            return x, x

        return lax.scan(step, x0, us)[1]

    def taps(size: int, k: int = 3) -> int:
        return sum(1 for p in range(size) for r in range(k) if 0 <= p + r - 1 < size)

    return [
        dict(
            name="jax_mlp",
            fn=mlp,
            inputs=lambda: [rand(64, 128), rand(128, 256), rand(256, 128)],
            macs=64 * 128 * 256 * 2,
        ),
        dict(
            name="jax_cnn",
            fn=cnn,
            inputs=lambda: [rand(4, 8, 16, 16), rand(16, 8, 3, 3)],
            macs=4 * 16 * 8 * taps(16) ** 2,
        ),
        dict(
            name="jax_attention",
            fn=attention,
            inputs=lambda: [rand(64, 32), *(rand(32, 32) for _ in range(3))],
            macs=3 * 64 * 32 * 32 + 2 * 64 * 64 * 32,
        ),
        dict(
            name="jax_scan_rnn",
            fn=rnn,
            inputs=lambda: [rand(16, 8, 64), rand(64, 64, scale=0.1)],
            macs=16 * 8 * 64 * 64,
        ),
        dict(
            name="jax_while_solver",
            fn=solver,
            inputs=lambda: [rand(32, 32, scale=0.1), rand(4, 32)],
            macs=12 * 4 * 32 * 32,
        ),
        dict(
            name="jax_mpc_rollout",
            fn=mpc,
            inputs=lambda: [rand(256, 8), rand(32, 256, 2), rand(8, 8, scale=0.1), rand(8, 2)],
            macs=32 * 256 * (8 * 8 + 8 * 2),
        ),
    ]
