"""Judging one admitted object against an inventory: the overlay, and what relates to it.

``overlay`` lays the object over the inventory and restores it; ``focus`` picks the items of
each rule scope the object can change. The admission webhook reuses both, over its
list/watch caches (``gpulint.cluster.cache``).
"""
