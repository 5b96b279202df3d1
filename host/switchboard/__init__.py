"""The switchboard: which actions may run, what a run may spend, and the dry runs (verify,
rehearse) that say so before anything runs."""
