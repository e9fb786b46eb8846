"""Every kind of object gpulint knows: one registry entry and one view each."""
