"""Benchmarks: python -m torchrl_glam.benchmarks.<name>."""
