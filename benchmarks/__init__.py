"""Benchmarks of layered-memory against deepagents' built-in `MemoryMiddleware` (issue 6).

Run them all with `make bench` (`.venv/bin/python benchmarks/run.py`); see `run.py`.
"""
