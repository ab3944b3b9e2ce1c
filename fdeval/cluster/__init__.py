"""Running fdeval on a cluster: Slurm job arrays (submitit), sizing (`stage=plan`), status."""
