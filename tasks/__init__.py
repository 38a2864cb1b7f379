"""Finite groups and the state-tracking streams built on them."""
