"""The resource ledger: its state, the cleanup stage and reconcile, below the host, the runs
and the engine."""
