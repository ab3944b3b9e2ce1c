"""The engine: runs any benchmark's declared steps over one run folder.

- `steps`: what a benchmark declares (`Step`, `CaseStep`, `Aggregate`, `Metric`, `Result`);
- `benchmark`: the `Benchmark` interface (cases, steps, metrics, user policy);
- `run`: `RunFolder` (layout, identity, artifact states) and `Run` (what a step is given);
- `executor`: skip-if-done-and-identical, atomic writes, error records, retries for case steps;
- `shared`: the steps every benchmark has (`generate`, `run`, `score`);
- `launcher`: the `Launcher` interface and the local launcher (Slurm's lives in `fdeval.cluster`);
- `driver`: `prepare`, `run_stages`, `run_steps`; `status`: `stage=status` for any benchmark;
- `identity`: run identity, folder names, the folder lock.
The engine imports no benchmark and no launcher implementation (import-linter checks it).
"""
