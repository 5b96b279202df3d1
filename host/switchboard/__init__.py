"""The switchboard: which actions may run, and the caps on what a run may spend.

Verify (:mod:`pageant.events.verify`) and rehearsal (:mod:`pageant.engine.rehearsal`) are
the dry runs that read it.
"""
