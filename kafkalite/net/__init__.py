"""Drivers that run kafkalite's sans-I/O state machines: ``sim`` (deterministic simulator)."""
