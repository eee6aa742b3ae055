"""A job, followed: its log (follower -> spool -> VeRL step parser), its scalars
(TensorBoard mirror -> incremental reader), its checkpoints, the run's metrics store and
the run history. `watcher.JobWatcher` composes them; each module has one job (see
docs/ARCHITECTURE.md, "Job log -> spool -> parser -> metrics")."""
