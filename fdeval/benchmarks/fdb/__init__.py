"""Full-Duplex-Bench (v1 and v1.5) on fdeval's engine: its samples played live, its metrics (docs/fdb.md)."""
