"""The cross-run report: `python -m fdeval.report RUN_DIR [RUN_DIR ...] --out DIR`.

Any benchmark's runs (see `fdeval.report.__main__`); Instruct-FD's tables live with it in
`fdeval.benchmarks.instructfd.reporting`; docs/metrics.md describes them.
"""
