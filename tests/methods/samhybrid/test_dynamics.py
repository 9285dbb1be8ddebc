import numpy as np
import pytest
import torch
from scipy.integrate import solve_ivp

from neurips26.methods.samhybrid.dynamics import DAMPED_PENDULUM, DUFFING, get_system, make_splits, simulate


@pytest.mark.parametrize("system", [DAMPED_PENDULUM, DUFFING], ids=lambda s: s.name)
def test_generator_matches_scipy_solve_ivp(system) -> None:
    initial = torch.tensor([[0.8, -0.3]], dtype=torch.float64)
    ours = simulate(system, initial)[0].numpy()
    field_fn = system.vector_field(system.params)

    def scipy_field(t, x):
        return field_fn(torch.tensor(t), torch.tensor(x)).numpy()

    reference = solve_ivp(
        scipy_field,
        (0, system.horizon),
        initial[0].numpy(),
        t_eval=system.times().numpy(),
        rtol=1e-10,
        atol=1e-10,
        method="DOP853",
    )
    np.testing.assert_allclose(ours, reference.y.T, atol=1e-6)


def test_splits_are_deterministic_and_ood_is_larger() -> None:
    a = make_splits(DAMPED_PENDULUM, 4, 3, noise_std=0.01, seed=1)
    b = make_splits(DAMPED_PENDULUM, 4, 3, noise_std=0.01, seed=1)
    assert torch.equal(a.train, b.train)
    assert a.train.shape == (4, DAMPED_PENDULUM.n_steps + 1, 2)
    assert a.ood[:, 0].norm(dim=-1).min() > a.test[:, 0].norm(dim=-1).max()
    assert not torch.equal(a.train, make_splits(DAMPED_PENDULUM, 4, 3, noise_std=0.01, seed=2).train)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="unknown ODE system 'x'"):
        get_system("x")
    with pytest.raises(ValueError, match=r"initial_states must have shape \(batch, 2\)"):
        simulate(DUFFING, torch.zeros(3))
    with pytest.raises(ValueError, match="initial_states contains NaN"):
        simulate(DUFFING, torch.tensor([[float("nan"), 0.0]]))
