"""The model layer: pure functions for parameters, memory, throughput, efficiency, RL time,
cost, calibration and error bands."""
