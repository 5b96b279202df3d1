"""How the spec validator and its gate grammar word what they refuse: the words every
checker of authored JSON shares (:mod:`pageant.support.refusals`), importable from here."""

from __future__ import annotations

from pageant.support.refusals import an_object, bounded_list, refuse_unknown, show

__all__ = ["an_object", "bounded_list", "refuse_unknown", "show"]
