"""``python -m bench``: every benchmark, one table and one chart (see bench/run.py)."""

from bench.run import main

main()
