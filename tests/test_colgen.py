import networkx as nx
import numpy as np
import pytest
from conftest import (
    SMALL_TOPOLOGIES,
    all_chains,
    all_simple_paths,
    arc_flow_least_hop_bytes,
    arc_flow_optimum,
    path_least_hop_bytes,
    random_demands,
)

from optiq.errors import ParameterError, WorkloadError
from optiq.lp import LPStatus, build_pyomo_model, solve_lp, solve_pyomo_model
from optiq.lp.colgen import CGOptions, CGStatus, column_generation
from optiq.lp.lean import lean_plan
from optiq.lp.restricted import RestrictedLP
from optiq.paths import diverse_paths, route_twins, spread_paths
from optiq.paths.pricing import least_cost_paths, min_hops
from optiq.paths.space import PathSpace
from optiq.planner import make_plan
from optiq.topology import from_spec, torus
from optiq.workloads import Demands, constant_ratio
from optiq.workloads.qos import QoSClasses


def optimum_of_space(topo, d, routing):
    """The best plan of a path space by an independent formulation: arc flow on every link
    (free), on the links the network's routes between neighbours take (forwarded, every node a
    rank), or the LP over every chain through at most one rank (forwarded, switches)."""
    if routing == "free":
        return arc_flow_optimum(topo, d)
    if topo.num_endpoints == topo.num_nodes:
        return arc_flow_optimum(topo, d, links=route_twins(topo) == np.arange(topo.num_links))
    return solve_lp(topo, d, all_chains(topo, d), solver="ipm").time_s


@pytest.mark.parametrize("routing", ["free", "forwarded"])
@pytest.mark.parametrize("name", sorted(SMALL_TOPOLOGIES))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_column_generation_reaches_the_optimum_of_an_independent_formulation(name, seed, routing):
    topo = SMALL_TOPOLOGIES[name]()
    d = random_demands(topo, 5, seed)
    want = optimum_of_space(topo, d, routing)
    space = PathSpace(topo, d, routing)
    cg = column_generation(topo, d, CGOptions(gap=0.0, hop_slack=topo.num_nodes), space=space)  # any simple path
    assert cg.time_s == pytest.approx(want, rel=1e-6)
    assert cg.lower_bound_s <= want * (1 + 1e-9)
    assert all(it.bound_s <= want * (1 + 1e-9) for it in cg.history)  # every bound is a proven one
    assert cg.status in (CGStatus.GAP_REACHED, CGStatus.NO_IMPROVING_PATH)


def test_gap_stops_early_and_is_honest():
    t = torus((4, 4, 4), bandwidth=1e9)
    d = constant_ratio(64, nbytes=2**20, num_sources=4, ratio=8)
    exact = column_generation(t, d, CGOptions(gap=0.0))
    # the same solves, stopped at a looser gap: no later (the default loose run solves its LPs
    # by first order, whose iterations are not the exact run's)
    same = column_generation(t, d, CGOptions(gap=0.2, solver="ipm-nox", tolerance=1e-8))
    assert same.iterations <= exact.iterations
    loose = column_generation(t, d, CGOptions(gap=0.2))
    for run in (same, loose):
        assert run.history[-1].gap <= 0.2
        assert run.lower_bound_s <= exact.time_s * (1 + 1e-9)
        assert exact.time_s <= run.time_s * (1 + 1e-9)  # equal optima may differ in the last bits


@pytest.mark.parametrize("busy", [0.0, 0.9, 1.0])
def test_restricted_lp_with_lazy_rows_matches_the_one_shot_lp(busy):
    t = torus((4, 4), bandwidth=1e9)
    d = constant_ratio(16, nbytes=2**20, num_sources=2, ratio=4)
    cands = diverse_paths(t, d, 4)
    lp = RestrictedLP(t, d)
    lp.add_paths(cands)
    lp.add_busy_links(busy)
    sol = lp.solve()
    assert sol.time_s == pytest.approx(solve_lp(t, d, cands).time_s, rel=1e-7)
    assert sol.time_s == pytest.approx(sol.link_s.max()) and sol.link_price.sum() == pytest.approx(1.0)
    assert sol.price_scale == pytest.approx(lp.t0 / sol.time_s, rel=1e-6)  # strong duality: sum u = Z
    assert sol.job_dual.sum() == pytest.approx(1.0, rel=1e-6)
    assert (busy < 1.0) or sol.rows < t.num_links  # rows only where needed


def test_pricing_is_the_cheapest_path_within_the_hop_limit():
    t = torus((4, 4), bandwidth=1e9)
    rng = np.random.default_rng(0)
    cost = rng.random(t.num_links)
    src, dst = np.array([0, 3, 5]), np.array([10, 12, 6])
    limit = min_hops(t, src, dst) + 1
    paths, got, free = least_cost_paths(t, src, dst, cost, limit)
    g = t.to_networkx()

    for j in range(3):
        best = min(sum(cost[k] for _, _, k in p)
                   for p in nx.all_simple_edge_paths(g, int(src[j]), int(dst[j]), cutoff=int(limit[j])))
        assert got[j] == pytest.approx(best)
        path = paths.path(j)
        assert path.size <= limit[j] and t.link_src[path[0]] == src[j] and t.link_dst[path[-1]] == dst[j]
        assert free[j] <= got[j] + 1e-12


def test_opt_plan_records_gap_and_bound():
    t = torus((4, 4, 2), bandwidth=1e9)
    d = constant_ratio(32, nbytes=2**20, num_sources=2, ratio=4)
    plan = make_plan(t, d, "opt")
    assert plan.info["cg_status"] == "gap reached"
    assert plan.lower_bound_time_s <= plan.predicted_time_s
    assert plan.predicted_time_s <= plan.lower_bound_time_s / (1 - 0.01) * (1 + 1e-6)


def _qos_case():
    t = torus((3, 3), bandwidth=1e9)
    d = random_demands(t, 6, seed=4)
    q = QoSClasses({"gold": 0.6, "silver": 0.3, "bronze": 0.1}, ["gold", "gold", "silver", "silver", "bronze", "bronze"])
    return t, d, q


def test_qos_classes_get_their_shares_and_t_is_optimal():
    t, d, q = _qos_case()
    plan = make_plan(t, d, "opt", qos=q, gap=0.0, hop_slack=t.num_nodes)
    rates = plan.info["qos_throughput_Bps"]
    T = sum(rates.values())
    for name, alpha in q.shares.items():
        assert rates[name] == pytest.approx(alpha * T)
    # sending every class at its rate over the plan's paths fits every link (rounding aside)
    names, cls = q.class_index()
    class_bytes = np.bincount(cls, weights=d.nbytes, minlength=len(names))
    job_rate = np.array([rates[n] for n in names])[cls] * d.nbytes / class_bytes[cls]
    path_rate = plan.path_bytes / d.nbytes[plan.paths.job] * job_rate[plan.paths.job]
    load = plan.paths.link_loads(path_rate, t.num_links)
    assert (load <= t.capacity * (1 + 1e-4)).all() and load.max() >= t.capacity.max() * (1 - 1e-4)
    # and T is the best possible: the LP over every simple path with the same effective sizes
    best = solve_lp(t, d, all_simple_paths(t, d), sizes=q.effective_sizes(d)).time_s
    assert T == pytest.approx(d.nbytes.sum() / best, rel=1e-6)


def test_qos_in_the_pyomo_model_gives_the_same_optimum():
    t, d, q = _qos_case()
    paths = all_simple_paths(t, d)
    model = build_pyomo_model(t, d, paths, qos=q)
    assert dict(model.alpha.items()) == q.shares
    assert solve_pyomo_model(model).time_s == pytest.approx(
        solve_lp(t, d, paths, sizes=q.effective_sizes(d)).time_s, rel=1e-6)


@pytest.mark.parametrize("shares, classes, fragment", [
    ({"a": 0.5, "b": 0.6}, ["a", "b"], "sum to 1"),
    ({"a": 1.0}, ["a", "c"], "'c' has no share"),
    ({"a": -1.0, "b": 2.0}, ["a", "b"], "positive share"),
])
def test_bad_qos_is_a_workload_error(shares, classes, fragment):
    with pytest.raises(WorkloadError, match=fragment):
        QoSClasses(shares, classes)


def test_a_progress_that_cannot_be_called_is_refused_before_any_work():
    t = torus((4, 4), bandwidth=1e9)
    with pytest.raises(ParameterError, match="progress must be a callable"):
        column_generation(t, constant_ratio(16, nbytes=2**20, num_sources=2, ratio=4), progress="yes")


def test_a_time_limited_run_is_never_worse_than_its_first_restricted_lp():
    t = torus((8, 8, 8), bandwidth=1e9)
    d = constant_ratio(512, nbytes=2**20, num_sources=32)
    one = column_generation(t, d, CGOptions(max_iterations=1, gap=0.0))
    assert one.status == CGStatus.ITERATION_LIMIT and one.time_s <= one.first_time_s * (1 + 1e-12)
    longer = column_generation(t, d, CGOptions(time_limit=5.0, gap=0.0))
    assert longer.time_s <= longer.first_time_s * (1 + 1e-12)
    plan = make_plan(t, d, "opt", time_limit=5.0)
    # the plan is the best solution's whole bytes: its busiest link matches that LP's time
    assert plan.predicted_time_s == pytest.approx(plan.info["lp_time_s"], rel=1e-4)
    assert plan.lower_bound_time_s <= plan.predicted_time_s
    # and never slower than the machine's own routes, which are among the first columns
    default = make_plan(t, d, "default")
    assert plan.predicted_time_s <= default.predicted_time_s


def test_a_time_limit_before_the_first_lp_gives_the_default_routes_and_says_so():
    t = torus((8, 8, 8), bandwidth=1e9)
    d = constant_ratio(512, nbytes=2**20, num_sources=32)
    cg = column_generation(t, d, CGOptions(time_limit=1e-3, gap=0.0))
    assert cg.status == CGStatus.TIME_LIMIT and cg.iterations == 0
    plan = make_plan(t, d, "opt", time_limit=1e-3)
    default = make_plan(t, d, "default")
    assert plan.predicted_time_s == pytest.approx(default.predicted_time_s)
    assert plan.info["cg_status"] == "time limit" and plan.lower_bound_time_s <= plan.predicted_time_s
    assert any("before the first LP" in w for w in plan.info["warnings"])


def test_first_order_restricted_lps_reach_the_interior_point_optimum():
    t = torus((4, 4, 4), bandwidth=1e9)
    d = constant_ratio(64, nbytes=2**20, num_sources=4, ratio=8)
    exact = column_generation(t, d, CGOptions(gap=0.0))
    fast = column_generation(t, d, CGOptions(gap=0.005, solver="hipdlp"))
    assert fast.lower_bound_s <= exact.time_s * (1 + 1e-9)
    assert fast.time_s <= exact.time_s * 1.005 + 1e-15


@pytest.mark.parametrize("name", sorted(SMALL_TOPOLOGIES))
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("routing", ["free", "forwarded"])
def test_the_lean_step_keeps_the_time_and_meets_the_least_hop_bytes_of_an_independent_lp(name, seed, routing):
    topo = SMALL_TOPOLOGIES[name]()
    demands = random_demands(topo, 6, seed=seed)
    plain = make_plan(topo, demands, "opt", lean=False, routing=routing)
    lean = make_plan(topo, demands, "opt", routing=routing)
    assert lean.predicted_time_s == pytest.approx(plain.predicted_time_s, rel=1e-6)
    if routing == "free":
        least = arc_flow_least_hop_bytes(topo, demands, lean.predicted_time_s)
    elif topo.num_endpoints == topo.num_nodes:
        least = arc_flow_least_hop_bytes(topo, demands, lean.predicted_time_s,
                                         links=route_twins(topo) == np.arange(topo.num_links))
    else:
        least = path_least_hop_bytes(topo, demands, all_chains(topo, demands), lean.predicted_time_s)
    hop_bytes = float((lean.path_bytes * lean.paths.hops).sum())
    assert least * (1 - 1e-6) <= hop_bytes <= 1.02 * least
    assert hop_bytes <= float((plain.path_bytes * plain.paths.hops).sum()) * (1 + 1e-9)
    if lean.info.get("default_optimal"):  # shortest routes at the cut bound: nothing to make lean
        assert lean.predicted_time_s == pytest.approx(lean.info["cut_bound_s"], rel=1e-9) and "lean" not in lean.info
        return
    info = lean.info["lean"]
    assert info["hop_bytes"] <= info["hop_bytes_before"] and info["hop_bytes_bound"] <= least * (1 + 1e-6)


def _dragonfly_all_to_all() -> tuple:
    """A small dragonfly's all-to-all-v, on which HiGHS's hipdlp runs without end over some path sets."""
    t = from_spec("dragonfly:p=1,a=4,h=2")
    n = t.num_endpoints
    sizes = np.random.default_rng(0).integers(1, 1000, (n, n)) * 8
    np.fill_diagonal(sizes, 0)
    src, dst = np.nonzero(sizes)
    return t, Demands(src, dst, sizes[src, dst])


def test_a_first_order_lp_that_does_not_converge_is_solved_by_interior_point():
    t, d = _dragonfly_all_to_all()
    paths = spread_paths(t, d, 4)
    exact = solve_lp(t, d, paths, solver="ipm")
    stuck = solve_lp(t, d, paths, solver="hipdlp", time_limit=120)
    assert stuck.status == LPStatus.OPTIMAL and stuck.solver == "ipm-nox"
    assert stuck.time_s == pytest.approx(exact.time_s, rel=1e-6)


def test_a_first_order_solve_through_pyomo_that_reaches_its_iteration_limit_gives_way_to_interior_point(monkeypatch):
    import optiq.lp.pyomo_lp as pyomo_lp

    t = torus((4, 4), bandwidth=1e9)
    d = constant_ratio(16, nbytes=2**20, num_sources=2, ratio=4)
    paths = diverse_paths(t, d, k=3)
    exact = solve_lp(t, d, paths, solver="ipm")
    monkeypatch.setattr(pyomo_lp, "first_order_limit", lambda rows, columns: 1)  # no first-order solve converges
    sol = solve_pyomo_model(build_pyomo_model(t, d, paths), solver="hipdlp")
    assert sol.solver == "ipm-nox" and sol.status == LPStatus.OPTIMAL
    assert sol.time_s == pytest.approx(exact.time_s, rel=1e-6)


def test_column_generation_whose_first_order_solves_do_not_converge_ends_all_the_same():
    t, d = _dragonfly_all_to_all()
    plan = make_plan(t, d, "opt", routing="free", time_limit=120)  # hipdlp ran on past any limit here
    assert plan.info["cg_status"] == "gap reached"
    assert plan.predicted_time_s == pytest.approx(plan.info["cut_bound_s"], rel=1e-6)


def test_a_lean_round_whose_solve_overfills_a_link_without_a_row_still_gives_a_plan_that_fits():
    t = torus((8, 8, 8), bandwidth=1e9)
    d = constant_ratio(512, nbytes=2**20, num_sources=32, ratio=8)
    cg = column_generation(t, d)
    lines: list[str] = []
    lean = lean_plan(t, d, cg.paths, cg.share, cg.time_s, max_iterations=1, progress=lines.append)
    assert any("overfilled link rows" in line for line in lines)  # the round this test is about
    moved = lean.share * d.nbytes[lean.paths.job]
    assert lean.paths.busiest_link_time(moved, t.capacity) <= cg.time_s * (1 + 1e-9)
    assert np.bincount(lean.paths.job, weights=lean.share, minlength=d.num_jobs) == pytest.approx(1.0)
    assert float(moved @ lean.paths.hops) == pytest.approx(lean.hop_bytes) and lean.hop_bytes < lean.hop_bytes_before


@pytest.mark.parametrize("setting, fragment", [
    (dict(gap=1.0), "gap must be in \\[0, 1\\)"), (dict(gap=-0.1), "gap must be"), (dict(hop_slack=-1), "hop_slack"),
    (dict(max_iterations=0), "max_iterations must be an integer >= 1"), (dict(seed=1.5), "seed"),
    (dict(time_limit=0), "time_limit must be a finite number of seconds > 0"), (dict(time_limit=float("nan")), "time_limit"),
    (dict(smoothing=0), "smoothing"), (dict(tolerance=2.0), "tolerance"), (dict(idle_share=1.0), "idle_share"),
    (dict(vertex_paths=-1), "vertex_paths"), (dict(vertex_paths=1.5), "vertex_paths"),
    (dict(solver="simplx"), "unknown solver 'simplx'")])
def test_column_generation_options_out_of_range_are_named_before_any_work(setting, fragment):
    with pytest.raises(ParameterError, match=fragment):
        CGOptions(**setting)


def test_column_generation_options_take_their_boundary_values_and_choose_the_solver_by_gap():
    for edge in (dict(gap=0.0), dict(idle_share=0.0), dict(hop_slack=0), dict(vertex_paths=0),
                 dict(vertex_paths=None), dict(time_limit=1e-3), dict(seed=np.int64(3))):
        CGOptions(**edge)  # accepted
    assert CGOptions().lp_solver == "hipdlp" and CGOptions(gap=1e-4).lp_solver == "ipm-nox"
    assert CGOptions(gap=0.0).lp_tolerance == 1e-8 and CGOptions(solver="ipm", tolerance=1e-7).lp_tolerance == 1e-7


@pytest.mark.parametrize("dims", [(4, 4, 4), (6, 6)])
def test_a_first_order_solve_good_enough_but_for_its_slack_is_solved_closer(dims):
    """At a loose tolerance hipdlp's shares overfill some links beyond the LP's optimum; asked
    for a time the LP's optimum meets, the solve tightens its tolerance until the shares meet
    it too, and only then (a time below the optimum is not chased)."""
    from optiq.paths.initial import initial_columns
    from optiq.workloads import random_pairing

    t = torus(dims, bandwidth=1e9)
    d = random_pairing(constant_ratio(t.num_nodes, "disjoint", nbytes=2**20), seed=1)
    columns = initial_columns(t, d, k=5)

    def solved(solver, tolerance, **kw):
        lp = RestrictedLP(t, d, solver=solver, tolerance=tolerance)
        lp.add_paths(columns)
        lp.add_busy_links(0.0)
        return lp.solve(**kw)

    optimum = solved("ipm-nox", 1e-9).time_s
    plain = solved("hipdlp", 1e-2)
    assert plain.time_s > optimum * 1.001 and plain.rounds == 1   # the slack this test is about
    closer = solved("hipdlp", 1e-2, good_enough_s=optimum * 1.001)
    assert closer.time_s <= optimum * 1.001 and closer.rounds > 1
    unreachable = solved("hipdlp", 1e-2, good_enough_s=optimum * 0.99)
    assert unreachable.rounds == 1 and unreachable.time_s == plain.time_s


def test_a_first_order_solve_that_cannot_end_the_run_is_not_solved_again_for_its_missing_rows():
    """Rows only raise the optimum: a solve above the time asked for, by more than its slack,
    returns with its links over (their rows added for the next solve) where one that could
    meet it is solved again until every loaded link has its row."""
    t = torus((8, 8), bandwidth=1e9)
    d = constant_ratio(64, nbytes=2**20, num_sources=4, ratio=8)
    cands = diverse_paths(t, d, 4)

    def solved(**kw):
        lp = RestrictedLP(t, d, solver="hipdlp", tolerance=1e-3)   # no scouting at this tolerance
        lp.add_paths(cands)
        lp.add_busy_links(1.0)
        return lp, lp.num_link_rows, lp.solve(**kw)

    _, _, full = solved()
    assert full.over == 0 and full.rounds > 1   # rows were missing: what this test is about
    lp, before, early = solved(good_enough_s=full.optimum_s * 0.5)
    assert early.rounds == 1 and early.over > 0 and early.optimum_s < early.time_s
    assert early.rows >= before + early.over and lp.solve().over == 0   # their rows added, for the next solve
    _, _, reachable = solved(good_enough_s=full.optimum_s * 1.5)
    assert reachable.over == 0 and reachable.rounds == full.rounds
    assert reachable.optimum_s == pytest.approx(reachable.time_s, rel=1e-2)


def test_a_first_order_solve_that_cannot_end_the_run_keeps_its_scouting_solution():
    """Far above the time asked for, the solve at the tolerance asked for after the scouting
    ones (which find the rows at a looser tolerance) could not end the run: it is skipped."""
    from optiq.lp.restricted import SCOUT_TOLERANCE

    t = torus((8, 8), bandwidth=1e9)
    d = constant_ratio(64, nbytes=2**20, num_sources=4, ratio=8)
    cands = diverse_paths(t, d, 4)

    def solved(**kw):
        lp = RestrictedLP(t, d, solver="hipdlp", tolerance=1e-6)
        lp.add_paths(cands)
        lp.add_busy_links(1.0)
        return lp.solve(**kw)

    full = solved()
    early = solved(good_enough_s=full.optimum_s * 0.5)
    assert early.over == 0 and early.rounds < full.rounds
    assert early.optimum_s == pytest.approx(full.optimum_s, rel=10 * SCOUT_TOLERANCE)
    near = solved(good_enough_s=full.optimum_s * 0.999)   # within the scouting slack: solved closer
    assert near.rounds == full.rounds and near.optimum_s == full.optimum_s
