"""The solver layer: the decision space, its CP-SAT encoding, the exact search, plan, pareto,
tune and the explanations."""
