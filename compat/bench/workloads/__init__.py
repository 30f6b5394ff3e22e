"""The workloads of ``make bench`` (compat/bench/run_all.py), one module per family.

``stats`` is pure (statistics, table rendering, failure cells) and unit-tested; the others drive
real servers with real clients and return plain numbers.
"""
