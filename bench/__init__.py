"""Benchmarks for mcpd: they print figures and write JSON to ``bench/results/``.

Run ``python -m bench --list`` to see them and ``python -m bench [NAME ...]`` to run them.
Benchmarks never assert on speed; they measure and report.
"""
