"""Benchmarks: kafkalite against the raw file system it sits on."""
