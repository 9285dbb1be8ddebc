import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pytorch_optimizer import SAM
from torch import nn

from neurips26.bench.experiment import SilentProgress
from neurips26.core.config import apply_overrides
from neurips26.methods.samhybrid import (
    HybridModel,
    SAMHybrid,
    SAMHybridConfig,
    fit_hybrid,
    identifiability_report,
    top_hessian_eigenvalue,
)
from neurips26.methods.samhybrid.baselines import AphynityPenalty, Recipe, make_optimizer
from neurips26.methods.samhybrid.dynamics import DAMPED_PENDULUM, make_splits
from neurips26.methods.samhybrid.experiment import (
    EXPERIMENT,
    SAMHybridExperimentConfig,
    relative_theta_error,
    run,
)
from neurips26.methods.samhybrid.integration import split_windows
from neurips26.methods.samhybrid.physics import FrictionlessPendulum, LinearOscillator
from neurips26.testing import assert_module_basics
from neurips26.zoo.builders import tiny_mlp


def _quadratic_problem(seed: int = 0):
    torch.manual_seed(seed)
    model = HybridModel(LinearOscillator(), tiny_mlp(2, 2, hidden=8, seed=seed))
    x = torch.randn(16, 2)
    target = torch.randn(16, 2)

    def closure():
        loss = ((model(torch.zeros(()), x) - target) ** 2).mean()
        loss.backward()
        return loss

    return model, closure


def _params(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def test_rho_zero_is_exactly_the_base_optimizer() -> None:
    model_a, closure_a = _quadratic_problem()
    model_b = copy.deepcopy(model_a)
    sam = SAMHybrid(model_a.param_groups(), torch.optim.Adam, rho=0.0, lr=0.01)
    adam = torch.optim.Adam(model_b.param_groups(), lr=0.01)  # same groups, so the same kernels
    x, target = torch.randn(16, 2), torch.randn(16, 2)
    for _ in range(5):

        def closure_sam():
            sam.zero_grad()
            loss = ((model_a(torch.zeros(()), x) - target) ** 2).mean()
            loss.backward()
            return loss

        sam.step(closure_sam)
        adam.zero_grad()
        ((model_b(torch.zeros(()), x) - target) ** 2).mean().backward()
        adam.step()
    for a, b in zip(model_a.parameters(), model_b.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    del closure_a


@pytest.mark.parametrize("adaptive", [False, True])
def test_equals_pytorch_optimizer_sam_when_all_groups_are_perturbed(adaptive: bool) -> None:
    model_a, _ = _quadratic_problem()
    model_b = copy.deepcopy(model_a)
    ours = SAMHybrid(
        model_a.param_groups(), torch.optim.SGD, rho=0.1, rho_physics=0.1, adaptive=adaptive, lr=0.05
    )
    reference = SAM(model_b.parameters(), torch.optim.SGD, rho=0.1, adaptive=adaptive, lr=0.05)
    x, target = torch.randn(16, 2), torch.randn(16, 2)
    for _ in range(4):
        for model, optimizer in ((model_a, ours), (model_b, reference)):
            optimizer.zero_grad()
            ((model(torch.zeros(()), x) - target) ** 2).mean().backward()
            optimizer.first_step(zero_grad=True)
            ((model(torch.zeros(()), x) - target) ** 2).mean().backward()
            optimizer.second_step(zero_grad=True)
    for a, b in zip(model_a.parameters(), model_b.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


def test_physics_group_is_not_perturbed_and_norm_spans_ml_only() -> None:
    model, closure = _quadratic_problem()
    optimizer = SAMHybrid(model.param_groups(), torch.optim.SGD, rho=0.3, lr=0.1)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    closure()
    optimizer.first_step()
    moved = {n: (p.detach() - before[n]) for n, p in model.named_parameters()}
    assert all(torch.equal(moved[n], torch.zeros_like(moved[n])) for n in moved if n.startswith("physics."))
    ml_step = torch.sqrt(sum((d**2).sum() for n, d in moved.items() if n.startswith("ml.")))
    assert ml_step == pytest.approx(0.3, rel=1e-5)  # the whole radius goes to the ML part
    optimizer.second_step()
    for name, p in model.named_parameters():  # restored before the base step, then moved by SGD only
        expected = before[name] - 0.1 * p.grad
        torch.testing.assert_close(p.detach(), expected)


@settings(max_examples=25, deadline=None)
@given(rho=st.floats(0.001, 2.0), seed=st.integers(0, 1000))
def test_perturbation_has_norm_rho_property(rho: float, seed: int) -> None:
    model, closure = _quadratic_problem(seed)
    optimizer = SAMHybrid(model.param_groups(), torch.optim.SGD, rho=rho, rho_physics=rho, lr=0.1)
    before = _params(model)
    closure()
    optimizer.first_step()
    step = torch.sqrt(
        sum(((p.detach() - b) ** 2).sum() for p, b in zip(model.parameters(), before, strict=True))
    )
    assert float(step) == pytest.approx(rho, rel=1e-4)


def test_state_dict_round_trip_continues_identically() -> None:
    model_a, _ = _quadratic_problem()
    x, target = torch.randn(16, 2), torch.randn(16, 2)

    def train(model, optimizer, steps):
        for _ in range(steps):

            def closure():
                optimizer.zero_grad()
                loss = ((model(torch.zeros(()), x) - target) ** 2).mean()
                loss.backward()
                return loss

            optimizer.step(closure)

    opt_a = SAMHybrid(model_a.param_groups(), torch.optim.Adam, rho=0.05, lr=0.01)
    train(model_a, opt_a, 3)
    model_b = copy.deepcopy(model_a)
    opt_b = SAMHybrid(model_b.param_groups(), torch.optim.Adam, rho=0.5, lr=0.5)
    opt_b.load_state_dict(copy.deepcopy(opt_a.state_dict()))
    assert opt_b.param_groups[1]["rho"] == 0.05 and opt_b.param_groups[0]["lr"] == 0.01
    train(model_a, opt_a, 3)
    train(model_b, opt_b, 3)
    for a, b in zip(model_a.parameters(), model_b.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_hessian_power_iteration_matches_the_dense_eigenvalue() -> None:
    torch.manual_seed(0)
    a = torch.randn(5, 5, dtype=torch.float64)
    hessian = a @ a.T
    params = {"w": torch.randn(5, dtype=torch.float64)}
    value = top_hessian_eigenvalue(
        lambda p: 0.5 * p["w"] @ hessian @ p["w"], params, iterations=500, tolerance=1e-12
    )
    assert value == pytest.approx(float(torch.linalg.eigvalsh(hessian)[-1]), rel=1e-6)


def test_fit_hybrid_recovers_theta_without_ml_part() -> None:
    data = make_splits(DAMPED_PENDULUM, 8, 2, seed=0)
    model = HybridModel(FrictionlessPendulum(0.5), None)
    # a frictionless pendulum cannot fit damping exactly, but must move omega0^2 toward the truth
    fit_hybrid(model, data.train, data.times, torch.optim.Adam(model.parameters(), lr=0.05), 60, window=2)
    assert abs(model.theta()["omega0_sq"] - DAMPED_PENDULUM.params["omega0_sq"]) < 0.1


def test_split_windows_oracle() -> None:
    trajectories = torch.arange(2 * 7 * 1, dtype=torch.float32).reshape(2, 7, 1)
    windows = split_windows(trajectories, 3)
    naive = torch.stack([trajectories[b, s : s + 4] for b in range(2) for s in (0, 3)])
    assert torch.equal(windows, naive)


def test_identifiability_report_flags_a_parameter_the_ml_part_absorbs() -> None:
    # dx/dt = -theta x + w x: only theta - w is identified, so theta-hat depends on the ML init (seed).
    class Decay(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.theta = nn.Parameter(torch.tensor(0.3))

        def forward(self, x):
            return -self.theta * x

    times = torch.linspace(0, 2, 9)
    x0 = torch.linspace(0.5, 1.5, 6)[:, None]
    train = (x0[:, None, :] * torch.exp(-times)[None, :, None]).float()

    def build(rho, seed):
        torch.manual_seed(seed)
        ml = nn.Linear(1, 1, bias=False)
        nn.init.uniform_(ml.weight, -2.0, 2.0)
        model = HybridModel(Decay(), ml)
        return model, SAMHybrid(model.param_groups(), torch.optim.Adam, rho=rho, lr=0.05)

    with pytest.warns(UserWarning, match="not identified"):
        report = identifiability_report(
            build, train, train, times, rhos=[0.0, 0.05], seeds=[0, 1, 2], iterations=20, window=2
        )
    assert report.warnings and report.selected_rho in (0.0, 0.05)
    assert "selected rho" in report.summary()


def test_identifiability_report_is_quiet_when_theta_is_identified() -> None:
    data = make_splits(DAMPED_PENDULUM, 6, 2, seed=0)

    def build(rho, seed):
        model = HybridModel(FrictionlessPendulum(0.5), None)
        return model, torch.optim.Adam(model.parameters(), lr=0.05)

    report = identifiability_report(
        build,
        data.train,
        data.validation,
        data.times,
        rhos=[0.0],
        seeds=[0, 1],
        iterations=30,
        drift_tolerance=0.05,
        window=2,
    )
    assert report.warnings == []


def test_hybrid_model_basics_and_shapes() -> None:
    for shape, ml in (
        ("additive", tiny_mlp(2, 2)),
        ("output_correcting", tiny_mlp(2, 4)),
        ("non_additive", tiny_mlp(4, 2)),
    ):
        model = HybridModel(FrictionlessPendulum(), ml, shape)
        state = torch.randn(5, 2)
        wrapper = _StateOnly(model)
        assert_module_basics(wrapper, [state])
        assert model(torch.zeros(()), state).shape == state.shape


class _StateOnly(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.model(torch.zeros(()), state)


def test_bad_input_gets_clear_errors() -> None:
    frozen = FrictionlessPendulum()
    frozen.omega0_sq.requires_grad_(False)
    with pytest.raises(ValueError, match="physics has no trainable parameters"):
        HybridModel(frozen, tiny_mlp(2, 2))
    with pytest.raises(ValueError, match="rho must be finite and >= 0"):
        SAMHybrid(HybridModel(FrictionlessPendulum()).param_groups(), torch.optim.SGD, rho=-0.1, lr=0.1)
    with pytest.raises(ValueError, match="compose='mult' is not allowed"):
        HybridModel(FrictionlessPendulum(), tiny_mlp(2, 2), "mult")
    with pytest.raises(ValueError, match="compose returned shape"):
        HybridModel(FrictionlessPendulum(), tiny_mlp(2, 3), lambda s, f, ml: ml(s))(
            torch.zeros(()), torch.ones(4, 2)
        )
    with pytest.raises(ValueError, match="needs an ML part with 4 outputs"):
        HybridModel(FrictionlessPendulum(), tiny_mlp(2, 2), "output_correcting")(
            torch.zeros(()), torch.ones(4, 2)
        )
    model = HybridModel(FrictionlessPendulum(), None)
    times = torch.linspace(0, 1, 5)
    bad = torch.zeros(2, 5, 2)
    bad[0, 2, 0] = float("nan")
    with pytest.raises(ValueError, match="trajectories contains NaN"):
        fit_hybrid(model, bad, times, torch.optim.SGD(model.parameters(), lr=0.1), 1)
    with pytest.raises(ValueError, match="time points"):
        fit_hybrid(model, torch.zeros(2, 4, 2), times, torch.optim.SGD(model.parameters(), lr=0.1), 1)
    with pytest.raises(ValueError, match="shape='x' is not allowed"):
        SAMHybridExperimentConfig(shape="x")
    with pytest.raises(ValueError, match="iterations must be a positive integer"):
        SAMHybridExperimentConfig(iterations=0)
    with pytest.raises(ValueError, match="rho must be finite and >= 0"):
        SAMHybridConfig(rho=-1.0)
    with pytest.raises(ValueError, match="ascent='up' is not allowed"):
        SAMHybridConfig(ascent="up")
    with pytest.raises(TypeError, match="config must be a SAMHybridConfig"):
        SAMHybrid.from_config(model.param_groups(), torch.optim.SGD, {"rho": 0.1}, lr=0.1)
    with pytest.raises(ValueError, match="closure"):
        SAMHybrid(model.param_groups(), torch.optim.SGD, lr=0.1).step()


def test_aphynity_penalty_grows_lambda_and_needs_additive() -> None:
    model = HybridModel(FrictionlessPendulum(), tiny_mlp(2, 2), "additive")
    penalty = AphynityPenalty(1.0, 10.0)
    value = penalty(model, torch.randn(3, 4, 2), torch.tensor(0.5))
    assert penalty.weight == pytest.approx(6.0) and value > 0
    with pytest.raises(ValueError, match="additive"):
        AphynityPenalty(1.0, 1.0)(
            HybridModel(FrictionlessPendulum(), tiny_mlp(4, 2), "non_additive"),
            torch.randn(3, 4, 2),
            torch.tensor(0.1),
        )


def test_every_issue_baseline_is_a_system() -> None:
    assert set(EXPERIMENT.systems) == {
        "sam_ml",
        "physics_only",
        "nn_only",
        "erm",
        "erm_l2",
        "aphynity",
        "sam_all",
        "asam_ml",
        "random_ml",
    }
    assert EXPERIMENT.ours == "sam_ml"


def test_set_reaches_the_nested_method_config_and_the_optimizer() -> None:
    profile = EXPERIMENT.profile("smoke")
    config = EXPERIMENT.config_for(profile, {}, {"method.rho": 0.7, "method.adaptive": True, "lr": 0.03})
    recipe = EXPERIMENT.build_system("sam_ml", config)
    assert recipe.sam == SAMHybridConfig(rho=0.7, adaptive=True) and recipe.lr == 0.03
    model = HybridModel(FrictionlessPendulum(), tiny_mlp(2, 2))
    optimizer = make_optimizer(recipe, model)
    ml_group = next(g for g in optimizer.param_groups if g["role"] == "ml")
    assert ml_group["rho"] == 0.7 and ml_group["adaptive"] and ml_group["lr"] == 0.03
    with pytest.raises(ValueError, match=r"method\.rho"):
        EXPERIMENT.config_for(profile, {}, {"rho": 0.7})  # the old flat key lists the dotted ones


def test_every_system_is_built_from_the_config() -> None:
    config = SAMHybridExperimentConfig()
    changed = apply_overrides(
        config,
        {
            "lr": 0.02,
            "method.rho": 0.3,
            "rho_asam": 0.9,
            "l2_weight": 0.05,
            "aphynity_lambda0": 2.0,
            "aphynity_tau": 7.0,
        },
    )
    for name, factory in EXPERIMENT.systems.items():
        before, after = factory(config), factory(changed)
        assert isinstance(after, Recipe) and after.name == name and after.lr == 0.02
        assert before != after, f"{name} ignores the config"
    assert EXPERIMENT.build_system("asam_ml", changed).sam == SAMHybridConfig(rho=0.9, adaptive=True)
    assert EXPERIMENT.build_system("random_ml", changed).sam == SAMHybridConfig(rho=0.3, ascent="random")
    assert EXPERIMENT.build_system("erm_l2", changed).l2_weight == 0.05
    assert EXPERIMENT.build_system("aphynity", changed).penalty().tau == 7.0


def test_step_with_a_pytorch_closure_equals_fresh_two_pass_steps() -> None:
    # Issue #19: a closure written as the docstring says (it zeroes the gradients, as for LBFGS) must not
    # carry gradients over from one step to the next.
    model_a, _ = _quadratic_problem()
    model_b = copy.deepcopy(model_a)
    ours = SAMHybrid(model_a.param_groups(), torch.optim.SGD, rho=0.2, lr=0.1)
    reference = SAMHybrid(model_b.param_groups(), torch.optim.SGD, rho=0.2, lr=0.1)
    x, target = torch.randn(16, 2), torch.randn(16, 2)

    def loss_of(model):
        return ((model(torch.zeros(()), x) - target) ** 2).mean()

    def closure():
        ours.zero_grad()
        loss = loss_of(model_a)
        loss.backward()
        return loss

    for _ in range(3):
        returned = ours.step(closure)
        reference.zero_grad(set_to_none=True)
        expected = loss_of(model_b)
        expected.backward()
        reference.first_step(zero_grad=True)
        loss_of(model_b).backward()
        reference.second_step(zero_grad=True)
        assert float(returned.detach()) == pytest.approx(float(expected.detach()), rel=1e-6)
    for a, b in zip(model_a.parameters(), model_b.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-7, rtol=1e-6)


@pytest.mark.parametrize("ascent", ["gradient", "random"])
def test_first_step_climbs_the_loss_along_the_gradient(ascent: str) -> None:
    # Central idea 1 (sharpness-awareness): e = rho g/||g|| raises the loss by ~rho ||g|| to first order.
    # The 'random' ascent keeps the radius and drops the direction: its first-order rise is ~0.
    torch.manual_seed(3)
    model, closure = _quadratic_problem(seed=3)
    rho = 1e-3
    optimizer = SAMHybrid(model.param_groups(), torch.optim.SGD, rho=rho, ascent=ascent, lr=0.1)
    before = closure()
    grad_norm = torch.sqrt(sum((p.grad**2).sum() for n, p in model.named_parameters() if "ml." in n))
    optimizer.first_step(zero_grad=True)
    after = closure()
    rise = float(after - before)
    if ascent == "gradient":
        assert rise == pytest.approx(rho * float(grad_norm), rel=0.05)
    else:
        assert abs(rise) < 0.5 * rho * float(grad_norm)


def test_idea_sam_on_the_ml_part_lowers_theta_error_and_a_random_ball_does_not() -> None:
    # Central idea 1 end to end, through the experiment's ``run`` on the pendulum's additive hybrid
    # (seconds): SAM's flat-minimum pressure takes theta towards the truth; the same radius in a random
    # direction (the control) does not. Switched off (``_ascent_directions`` returning random draws),
    # ``sam_ml`` is no better than ERM and this test fails.
    config = apply_overrides(
        SAMHybridExperimentConfig(),
        {"iterations": 100, "n_train": 8, "n_test": 4, "measure_sharpness": False},
    )
    errors = {
        name: run(EXPERIMENT.build_system(name, config), config, None, 0, SilentProgress())["theta_error"]
        for name in ("sam_ml", "random_ml", "erm")
    }
    assert errors["sam_ml"] < errors["erm"] - 0.1, errors
    assert errors["random_ml"] > errors["erm"] - 0.05, errors


def test_theta_error_scoring() -> None:
    model = HybridModel(FrictionlessPendulum(DAMPED_PENDULUM.params["omega0_sq"] * 1.1), None)
    assert relative_theta_error(model, "pendulum") == pytest.approx(0.1, rel=1e-5)


def test_theta_error_fails_where_an_estimate_of_zero_scores() -> None:
    # issue #48: the fail level ("no method identifies theta here") is the score of theta_hat = 0
    model = HybridModel(FrictionlessPendulum(0.0), None)
    fail_level = EXPERIMENT.metric("theta_error").fail_level
    assert relative_theta_error(model, "pendulum") == pytest.approx(fail_level)


def test_optimizer_defaults_come_from_the_config_and_added_groups_get_their_roles_radius() -> None:
    """One home per default: ``SAMHybrid``'s radii are ``SAMHybridConfig``'s, also for groups added later."""
    config = SAMHybridConfig()
    model = HybridModel(FrictionlessPendulum(), tiny_mlp(2, 2), "additive")
    physics, ml = model.param_groups()
    optimizer = SAMHybrid([ml], torch.optim.Adam, lr=0.01)
    assert optimizer.param_groups[0]["rho"] == config.rho
    optimizer.add_param_group({"params": physics["params"], "role": "physics"})
    assert optimizer.param_groups[1]["rho"] == config.rho_physics != config.rho
    assert optimizer.base_optimizer.param_groups[1]["betas"] == (0.9, 0.999)  # the base's defaults reach it
    with pytest.raises(ValueError, match="role must be 'ml' or 'physics'"):
        optimizer.add_param_group({"params": [torch.nn.Parameter(torch.zeros(1))], "role": "other"})


def test_idea_fit_hybrid_perturbs_only_the_ml_part_by_the_whole_radius() -> None:
    """Central ideas 2 and 3 through the public training loop (``HybridModel.param_groups`` ->
    ``SAMHybrid.from_config`` -> ``fit_hybrid``): in the one iteration's two passes, the physics sees one
    theta (rho_physics = 0 reached it through the groups' roles), and the ML weights seen in the two
    passes differ by exactly rho (the ascent norm spans the ML group only, so the whole radius goes there).

    Switched off (each made this test fail): ``HybridModel.param_groups`` returning groups without roles
    (the physics then gets the ML radius), and ``SAMHybrid._perturbed_norm`` taking the norm over every
    group (the ML step is then shorter than rho).
    """
    torch.manual_seed(0)
    data = make_splits(DAMPED_PENDULUM, n_train=4, n_test=2, noise_std=0.01, seed=0)
    model = HybridModel(FrictionlessPendulum(omega0_sq=0.5), tiny_mlp(2, 2, hidden=8, seed=0), "additive")
    seen: dict[str, list[torch.Tensor]] = {"physics": [], "ml": []}

    def recorder(part: str):
        def hook(module: nn.Module, inputs: object) -> None:
            flat = torch.cat([p.detach().reshape(-1) for p in module.parameters()]).clone()
            if not seen[part] or not torch.equal(seen[part][-1], flat):
                seen[part].append(flat)

        return hook

    model.physics.register_forward_pre_hook(recorder("physics"))
    model.ml.register_forward_pre_hook(recorder("ml"))
    rho = 0.3
    optimizer = SAMHybrid.from_config(model.param_groups(), torch.optim.SGD, SAMHybridConfig(rho=rho), lr=0.1)
    fit_hybrid(model, data.train, data.times, optimizer, iterations=1, window=2, substeps=1)
    assert len(seen["ml"]) == 2, "the ML part must be seen at w and at w + e(w)"
    assert len(seen["physics"]) == 1, "the physics was perturbed: rho_physics did not reach its group"
    ml_step = float(torch.linalg.vector_norm(seen["ml"][1] - seen["ml"][0]))
    assert ml_step == pytest.approx(rho, rel=1e-4), "the ascent norm must span the perturbed groups only"
