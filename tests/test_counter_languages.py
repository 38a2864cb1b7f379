"""Counter languages (Dyck-1, Shuffle-Dyck-2, (a^n b^n)*, (a^n b^n c^n)*): the counter machine's
labels against the independent membership rule, and streams that stay inside the language."""
import json

import numpy as np
import pytest

from language_brute import is_prefix_of_member
from tasks import counter_languages
from tasks import registry
import launcher

# Prefix lengths whose completions a brute-force search can afford: a live prefix of length t
# completes within `extra` symbols (Dyck: t closes; a^n b^n c^n: 2 (t + 1)).
BRUTE = {"dyck1": (6, 7), "shuffle_dyck2": (4, 5), "anbn": (6, 7), "anbncn": (3, 8)}


def _sample(name, member=False, batch=8, length=12, seed=0):
  import jax
  task = registry.get_task(f"lang-{name}" + ("-member" if member else ""))
  tokens, labels = task.sample(jax.random.PRNGKey(seed), batch, length)
  return task, np.asarray(tokens), np.asarray(labels)


def test_every_counter_language_has_a_brute_force_bound():
  assert set(BRUTE) == set(counter_languages.LANGUAGES)


@pytest.mark.parametrize("name", list(counter_languages.LANGUAGES))
def test_short_prefixes_agree_with_brute_force(name):
  """Next-set labels (may come next, may end here) of the first positions, by exhaustive search
  over completions checked with the membership rule."""
  lang = counter_languages.get(name)
  t_max, extra = BRUTE[name]
  _, tokens, labels = _sample(name, length=t_max)
  k = len(lang.alphabet)
  for b in range(tokens.shape[0]):
    word = ""
    for t in range(t_max):
      word += lang.alphabet[tokens[b, t]]
      want = sum(1 << a for a in range(k) if is_prefix_of_member(lang, word + lang.alphabet[a], extra))
      want |= int(lang.member(word)) << k
      assert labels[b, t] == want, f"{name} at {word!r}: {labels[b, t]:b} != {want:b}"


@pytest.mark.parametrize("name", list(counter_languages.LANGUAGES))
def test_long_streams_stay_in_the_language_and_membership_matches_the_rule(name):
  """Past what brute force reaches: every next token was allowed by the previous label, and
  the -member label of every prefix is the membership rule's verdict."""
  lang = counter_languages.get(name)
  k = len(lang.alphabet)
  _, tokens, labels = _sample(name, length=300, batch=4, seed=3)
  _, tokens_m, member = _sample(name, member=True, length=300, batch=4, seed=3)
  assert (tokens == tokens_m).all()
  for b in range(tokens.shape[0]):
    word = "".join(lang.alphabet[a] for a in tokens[b])
    for t in range(1, 300):
      assert labels[b, t - 1] >> tokens[b, t] & 1, f"{name}: {word[:t + 1]!r} left the language"
    for t in range(300):
      assert member[b, t] == int(lang.member(word[:t + 1])), f"{name}: membership at {t}"
      assert labels[b, t] >> k & 1 == member[b, t]


def test_block_streams_draw_counts_that_grow_with_the_length():
  """A model is tested on counts it never saw: n reaches length / blocks."""
  _, tokens, _ = _sample("anbn", batch=64, length=1000)
  runs = [len(r) for row in tokens for r in "".join(map(str, row)).replace("10", "1 0").split()]
  assert max(runs) > 2 * 300, f"longest a^n b^n word {max(runs)}"
  _, tokens, _ = _sample("anbn", batch=64, length=60)
  leading_a = [len(s) - len(s.lstrip("0")) for s in ("".join(map(str, row)) for row in tokens)]
  assert max(leading_a) <= 30, "training words longer than the training length"


def test_block_streams_draw_word_lengths_log_uniformly_so_short_words_come_early():
  """n is log-uniform in 1..length / blocks: at length 1000 the median first word has about 20
  a's (uniform n: about 250, and a rule that never counts scores most strings whole)."""
  _, tokens, _ = _sample("anbn", batch=64, length=1000)
  first_n = [len(s) - len(s.lstrip("0")) for s in ("".join(map(str, row)) for row in tokens)]
  assert np.median(first_n) < 100, f"median first-word n {np.median(first_n)}: not log-uniform"


def test_info_says_a_counter_language_is_not_regular_and_cites_the_seed():
  out = launcher.run(["launch.info", "--language=dyck1", "--json"], timeout=120)
  assert out.returncode == 0, out.stderr
  d = json.loads(out.stdout)
  assert d["regular"] is False and d["monoid_size"] is None
  assert d["predictions"]["nonnegative_diagonal"]["verdict"] is True
  assert "Sarrof" in d["predictions"]["nonnegative_diagonal"]["source"]
