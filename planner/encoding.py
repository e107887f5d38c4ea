"""The only place that builds the CP-SAT model: decisions, named rules, objectives.

Every business rule is added by one ``_add_<rule>`` function and registered with a name, an
enforcement literal (so that explanations can switch it off or use it as an assumption), a unit
and a hint on how to relax it. Coefficients come from ``space.PlanSpace`` (read off the analytic
models); nothing here re-derives physics.

Units (DESIGN.md section 6): memory in MiB (requirements rounded up, capacities down), money in
whole dollars (rent: dollars per GPU-hour x 1000, i.e. milli-dollars), time as seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from planner.space import PHASES, PlanSpace

BIG = 10**12


@dataclass(frozen=True)
class Rule:
    name: str
    unit: str
    relax: str  # how to relax it, in the user's words


@dataclass
class Encoding:
    """The CP-SAT model of one request, its decision variables and its rules."""

    space: PlanSpace
    model: cp_model.CpModel = field(default_factory=cp_model.CpModel)
    var: dict[str, cp_model.IntVar] = field(default_factory=dict)
    offer: list[cp_model.IntVar] = field(default_factory=list)  # one-hot over space.offers
    strategy: list[cp_model.IntVar] = field(default_factory=list)  # one-hot over strategies
    rules: dict[str, Rule] = field(default_factory=dict)
    literal: dict[str, cp_model.IntVar] = field(default_factory=dict)

    def rule(self, name: str, unit: str, relax: str) -> cp_model.IntVar:
        """Register a rule and return its enforcement literal."""
        lit = self.model.new_bool_var(f"rule:{name}")
        self.rules[name] = Rule(name, unit, relax)
        self.literal[name] = lit
        return lit


def dps_all(n: int) -> list[int]:
    """Divisors of n."""
    return [d for d in range(1, n + 1) if n % d == 0]


def _one_hot(m: cp_model.CpModel, n: int, name: str) -> list[cp_model.IntVar]:
    xs = [m.new_bool_var(f"{name}[{i}]") for i in range(n)]
    m.add_exactly_one(xs)
    return xs


def _choice(m: cp_model.CpModel, values: tuple[int, ...], name: str):
    """An integer variable restricted to ``values`` and its index variable."""
    idx = m.new_int_var(0, len(values) - 1, f"{name}_idx")
    val = m.new_int_var(min(values), max(values), name)
    m.add_element(idx, list(values), val)
    return val, idx


def build(space: PlanSpace) -> Encoding:
    """Decision variables and every rule; objectives are set by ``set_objective``."""
    enc = Encoding(space)
    m, req = enc.model, space.request
    enc.offer = _one_hot(m, len(space.offers), "offer")
    enc.strategy = _one_hot(m, len(space.strategies), "strategy")
    si = m.new_int_var(0, len(space.strategies) - 1, "strategy_idx")
    m.add(si == sum(i * x for i, x in enumerate(enc.strategy)))
    tp, tpi = _choice(m, space.tps, "tp")
    pp, ppi = _choice(m, space.pps, "pp")
    mb, _ = _choice(m, space.micro_batches, "micro_batch")
    max_gpus = req.num_gpus or req.max_gpus
    # mb x ga x dp = global batch: dp and ga divide it. Explicit domains propagate far better
    # through the products than intervals do.
    gb = req.global_batch_size
    dps = [d for d in range(1, min(gb, max_gpus) + 1) if gb % d == 0]
    dp = m.new_int_var_from_domain(cp_model.Domain.from_values(dps), "dp")
    mps = sorted({t * p for t in space.tps for p in space.pps})
    mp = m.new_int_var_from_domain(cp_model.Domain.from_values(mps), "tp_x_pp")
    ns = sorted({x * d for x in mps for d in dps if x * d <= max_gpus})
    n = m.new_int_var_from_domain(cp_model.Domain.from_values(ns), "num_gpus")
    m.add_multiplication_equality(mp, [tp, pp])
    m.add_multiplication_equality(n, [mp, dp])
    ga = m.new_int_var_from_domain(cp_model.Domain.from_values(dps_all(gb)), "grad_accum")
    enc.var.update(strategy_idx=si, tp=tp, tp_idx=tpi, pp=pp, pp_idx=ppi, micro_batch=mb,
                   dp=dp, num_gpus=n, grad_accum=ga)
    _add_structure(enc)
    _add_global_batch(enc)
    _add_gpu_memory(enc)
    _add_hosts(enc)
    _add_host_ram(enc)
    _add_budget(enc)
    _add_pins(enc)
    return enc


def _add_structure(enc: Encoding) -> None:
    """Facts of the decision space (always on): flags derived from the decisions."""
    m, v = enc.model, enc.var
    acc = m.new_bool_var("accumulates")  # grad_accum > 1
    m.add(v["grad_accum"] >= 2).only_enforce_if(acc)
    m.add(v["grad_accum"] == 1).only_enforce_if(~acc)
    multi = m.new_bool_var("multi_dp")  # dp > 1
    m.add(v["dp"] >= 2).only_enforce_if(multi)
    m.add(v["dp"] == 1).only_enforce_if(~multi)
    many = m.new_bool_var("multi_gpu")  # num_gpus > 1
    m.add(v["num_gpus"] >= 2).only_enforce_if(many)
    m.add(v["num_gpus"] == 1).only_enforce_if(~many)
    in_flight = m.new_int_var(1, max(enc.space.pps), "in_flight")
    m.add_min_equality(in_flight, [v["pp"], v["grad_accum"]])
    v.update(accumulates=acc, multi_dp=multi, multi_gpu=many, in_flight=in_flight)


def _add_global_batch(enc: Encoding) -> None:
    """micro-batch x grad_accum x dp = global batch (sequences per optimizer step)."""
    m, v, req = enc.model, enc.var, enc.space.request
    lit = enc.rule("global_batch", "sequences", f"change --global-batch ({req.global_batch_size})")
    per_rank = m.new_int_var(1, req.global_batch_size * max(enc.space.micro_batches), "mb_x_ga")
    m.add_multiplication_equality(per_rank, [v["micro_batch"], v["grad_accum"]])
    total = m.new_int_var(1, BIG, "global_batch")
    m.add_multiplication_equality(total, [per_rank, v["dp"]])
    m.add(total == req.global_batch_size).only_enforce_if(lit)
    v["global_batch"] = total


def _table_index(enc: Encoding, *, last: cp_model.LinearExpr, last_size: int):
    """Flat index (strategy, tp, pp, last) into the row-major memory tables."""
    sp, v = enc.space, enc.var
    return ((v["strategy_idx"] * len(sp.tps) + v["tp_idx"]) * len(sp.pps) + v["pp_idx"]) \
        * last_size + last


def _small_index(enc: Encoding, *, last: cp_model.LinearExpr, last_size: int):
    """Index (tp, pp, last) into one strategy's row-major table."""
    v = enc.var
    return (v["tp_idx"] * len(enc.space.pps) + v["pp_idx"]) * last_size + last


def _lookup(m: cp_model.CpModel, index, table: list[int], name: str) -> cp_model.IntVar:
    x = m.new_int_var(min(table), max(table), name)
    m.add_element(index, table, x)
    return x


def _add_gpu_memory(enc: Encoding) -> None:
    """Per-GPU memory of each phase <= capacity x (1 - margin) (MiB), for the chosen GPU.

    Per strategy, small element tables over (tp, pp, accumulation / in-flight micro-batches)
    give a + ceil(b/dp) + c*[dp>1] + micro_batch x activations; the inequality is enforced when
    that strategy is chosen. (One joint table over all strategies propagated 5-10x slower.)
    """
    sp, m, v = enc.space, enc.model, enc.var
    lit = enc.rule("gpu_memory", "MiB per GPU",
                   "a GPU with more memory, more GPUs (sharding), LoRA/QLoRA, checkpointing, "
                   "a smaller micro-batch or a shorter sequence")
    capacity = m.new_int_var(0, BIG, "capacity_mib")
    m.add(capacity == sum(o.capacity_mib * x for o, x in zip(sp.offers, enc.offer, strict=True)))
    max_pp = max(sp.pps)
    idx_s = _small_index(enc, last=v["accumulates"], last_size=2)
    idx_a = _small_index(enc, last=v["in_flight"] - 1, last_size=max_pp)
    overhead = sp.memory.floor_mib + sp.memory.overhead_mib + \
        sp.memory.multi_gpu_mib * v["multi_gpu"]
    for phase in PHASES:
        states, acts = sp.memory.states[phase], sp.memory.acts[phase]
        for si, chosen in enumerate(enc.strategy):
            keys_s = [(si, tp, pp, acc) for tp in sp.tps for pp in sp.pps for acc in (False, True)]
            keys_a = [(si, tp, pp, f) for tp in sp.tps for pp in sp.pps
                      for f in range(1, max_pp + 1)]
            tag = f"{phase}:{si}"
            a = _lookup(m, idx_s, [states[k][0] for k in keys_s], f"{tag}:a")
            b_tab = [states[k][1] for k in keys_s]
            c_tab = [states[k][2] for k in keys_s]
            b = _lookup(m, idx_s, b_tab, f"{tag}:b")
            c = _lookup(m, idx_s, c_tab, f"{tag}:c")
            per_seq = _lookup(m, idx_a, [acts.get(k, 0) for k in keys_a], f"{tag}:act")
            b_per_dp = m.new_int_var(0, max(b_tab), f"{tag}:b/dp")
            m.add_division_equality(b_per_dp, b + v["dp"] - 1, v["dp"])  # ceil(b / dp)
            act = m.new_int_var(0, BIG, f"{tag}:act_mb")
            m.add_multiplication_equality(act, [per_seq, v["micro_batch"]])
            c_eff = m.new_int_var(0, max(c_tab), f"{tag}:c_eff")
            m.add(c_eff == c).only_enforce_if(v["multi_dp"])
            m.add(c_eff == 0).only_enforce_if(~v["multi_dp"])
            m.add(a + b_per_dp + c_eff + act + overhead <= capacity).only_enforce_if(
                [lit, chosen])
    v["capacity_mib"] = capacity


def _add_hosts(enc: Encoding) -> None:
    """GPUs fit in hosts (gpus per host of the chosen GPU/platform); tp stays in one host."""
    sp, m, v = enc.space, enc.model, enc.var
    lit = enc.rule("gpus_per_host", "GPUs", "a platform with more GPU slots, or less tp")
    per_host = m.new_int_var(1, max(o.gpus_per_host for o in sp.offers), "gpus_per_host")
    m.add(per_host == sum(o.gpus_per_host * x for o, x in zip(sp.offers, enc.offer, strict=True)))
    hosts = m.new_int_var(1, enc.space.request.num_gpus or enc.space.request.max_gpus, "hosts")
    slots = m.new_int_var(1, BIG, "host_slots")
    m.add_multiplication_equality(slots, [hosts, per_host])
    m.add(slots >= v["num_gpus"])
    m.add(v["tp"] <= per_host).only_enforce_if(lit)
    v.update(hosts=hosts, gpus_per_host=per_host)


def _add_host_ram(enc: Encoding) -> None:
    """Host RAM of one host (its ranks' offloaded states + processes) <= the platform's RAM.
    Rented instances: the provider's RAM is not in the catalog, so the rule is not added."""
    sp, m, v = enc.space, enc.model, enc.var
    if any(o.host_ram_mib is None for o in sp.offers):
        return
    lit = enc.rule("host_ram", "MiB per host",
                   "a host with more RAM, no CPU offload, or more GPUs to shard the states")
    keys = [(si, tp, pp) for si in range(len(sp.strategies)) for tp in sp.tps for pp in sp.pps]
    idx = _table_index(enc, last=0, last_size=1)
    a_tab = [sp.memory.host[k][0] for k in keys]
    b_tab = [sp.memory.host[k][1] for k in keys]
    a = m.new_int_var(0, max(a_tab), "host:a")
    b = m.new_int_var(0, max(b_tab), "host:b")
    m.add_element(idx, a_tab, a)
    m.add_element(idx, b_tab, b)
    b_per_dp = m.new_int_var(0, max(b_tab), "host:b/dp")
    m.add_division_equality(b_per_dp, b + v["dp"] - 1, v["dp"])
    ranks = m.new_int_var(1, max(o.gpus_per_host for o in sp.offers), "ranks_per_host")
    m.add_min_equality(ranks, [v["num_gpus"], v["gpus_per_host"]])
    per_rank = m.new_int_var(0, BIG, "host:per_rank")
    m.add(per_rank == a + b_per_dp)
    need = m.new_int_var(0, BIG, "host_ram_mib")
    m.add_multiplication_equality(need, [ranks, per_rank])
    ram = m.new_int_var(0, BIG, "host_ram_limit")
    m.add(ram == sum((o.host_ram_mib or 0) * x for o, x in zip(sp.offers, enc.offer, strict=True)))
    m.add(need <= ram).only_enforce_if(lit)
    v.update(host_ram_mib=need, host_ram_limit=ram)


def _add_budget(enc: Encoding) -> None:
    """Purchase: GPUs + hosts <= budget (whole dollars)."""
    sp, m, v, req = enc.space, enc.model, enc.var, enc.space.request
    gpu_price = m.new_int_var(0, BIG, "gpu_price")
    host_price = m.new_int_var(0, BIG, "host_price")
    m.add(gpu_price == sum(round(o.gpu_price_usd) * x
                           for o, x in zip(sp.offers, enc.offer, strict=True)))
    m.add(host_price == sum(round(o.host_price_usd) * x
                            for o, x in zip(sp.offers, enc.offer, strict=True)))
    gpus_cost = m.new_int_var(0, BIG, "gpus_cost")
    hosts_cost = m.new_int_var(0, BIG, "hosts_cost")
    m.add_multiplication_equality(gpus_cost, [v["num_gpus"], gpu_price])
    m.add_multiplication_equality(hosts_cost, [v["hosts"], host_price])
    cost = m.new_int_var(0, BIG, "cost_usd")
    m.add(cost == gpus_cost + hosts_cost)
    m.add(cost >= sum(round(o.gpu_price_usd + o.host_price_usd) * x
                      for o, x in zip(sp.offers, enc.offer, strict=True)))
    v["cost_usd"] = cost
    if req.budget_usd is not None:
        lit = enc.rule("budget", "USD", f"raise --budget above ${req.budget_usd:,.0f}")
        m.add(cost <= int(req.budget_usd)).only_enforce_if(lit)


def _add_pins(enc: Encoding) -> None:
    """Values the user fixed: each pin is a rule, so a conflict can name it."""
    m, v, req = enc.model, enc.var, enc.space.request
    pins = {"num_gpus": req.num_gpus, "grad_accum": req.grad_accum}
    for name, value in pins.items():
        if value is not None:
            lit = enc.rule(f"pin:{name}", "", f"leave --{name.replace('_', '-')} open")
            m.add(v[name] == value).only_enforce_if(lit)
