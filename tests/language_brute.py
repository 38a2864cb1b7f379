"""Brute-force language facts the language tests check the samplers and targets against."""


def is_prefix_of_member(lang, word: str, extra: int) -> bool:
  """Some completion of `word` by at most `extra` symbols is in the language."""
  frontier = [word]
  for _ in range(extra + 1):
    if any(lang.member(x) for x in frontier):
      return True
    frontier = [x + a for x in frontier for a in lang.alphabet]
  return False
