"""Package data: a copy of ``conf/events.avsc`` so an installed (non-checkout) package works.

A unit test keeps this copy byte-identical to ``conf/events.avsc``, the single source of truth.
"""
