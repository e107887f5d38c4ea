"""The validation layer: published measurements predicted and compared, and the independent
reference enumeration the differential tests use."""
