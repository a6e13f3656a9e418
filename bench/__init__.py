"""Benchmarks for NotifyFlow (issue #6). Entry point: ``python -m bench.run [--quick]``."""
