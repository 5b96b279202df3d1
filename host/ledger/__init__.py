"""The resource ledger's state and reconcile, below the host, the runs and the engine."""
