"""Benchmarks (not part of the test suite); results go to benchmarks/results/ (gitignored)."""
