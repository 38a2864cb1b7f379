"""Regular languages: every named DFA against its independent membership rule, and the syntactic
monoid's verdicts (star-free or not) against the literature."""
import json
import random
import subprocess
import sys

import pytest

from ssm_bench import language_theory
from tasks import languages


@pytest.mark.parametrize("name", list(languages.LANGUAGES))
def test_dfa_agrees_with_brute_force_membership(name):
  d = languages.get(name)
  rng = random.Random(0)
  words = ["".join(rng.choice(d.alphabet) for _ in range(rng.randint(0, 14))) for _ in range(4000)]
  accepted = [w for w in words if d.member(w)]
  assert accepted, f"{name}: no random word is in the language; the check would be vacuous"
  wrong = [w for w in words if d.accepts(w) != d.member(w)]
  assert not wrong, f"{name}: the DFA and the membership rule disagree on {wrong[:5]}"


# Star-free (aperiodic syntactic monoid) or not: Schutzenberger; Tomita 1, 2, 4, 7 are star-free
# and 3, 5, 6 are not (e.g. Bhattamishra et al. 2020, Table 1); bounded Dyck-1 and the
# flip-flop language are star-free, parity and (aa)* are not (Sarrof et al. 2024).
STAR_FREE = {"tomita1": True, "tomita2": True, "tomita3": False, "tomita4": True,
             "tomita5": False, "tomita6": False, "tomita7": True, "parity": False,
             "aa_star": False, "abab_star": False, "dyck1_depth2": True, "dyck1_depth4": True,
             "flipflop_language": True}


def test_every_named_language_has_a_pinned_verdict():
  assert set(STAR_FREE) == set(languages.LANGUAGES)


@pytest.mark.parametrize("name,star_free", list(STAR_FREE.items()))
def test_syntactic_monoid_decides_star_freeness(name, star_free):
  d = language_theory.describe(languages.get(name))
  assert d["star_free"] is star_free, f"{name}: aperiodic={d['star_free']}"
  assert bool(d["maximal_subgroups"]) is not star_free, d["maximal_subgroups"]
  assert d["predictions"]["nonnegative_diagonal"]["verdict"] is star_free


def test_subgroups_name_the_counting_a_language_needs():
  assert language_theory.describe(languages.get("parity"))["maximal_subgroups"] == ["C2"]
  assert language_theory.describe(languages.get("tomita6"))["maximal_subgroups"] == ["C3"]
  # C3 is beyond a signed (real) diagonal layer at any depth: no stack of it recognizes tomita6
  assert language_theory.describe(languages.get("tomita6"))["predictions"][
      "signed_diagonal"]["verdict"] is False


def test_info_prints_a_language_and_refuses_an_unknown_one_in_one_line():
  out = subprocess.run([sys.executable, "-m", "launch.info", "--language=tomita5", "--json"],
                       capture_output=True, text=True, timeout=120)
  assert out.returncode == 0, out.stderr
  d = json.loads(out.stdout)
  assert d["monoid_size"] == 4 and d["star_free"] is False
  bad = subprocess.run([sys.executable, "-m", "launch.info", "--language=tomita9"],
                       capture_output=True, text=True, timeout=120)
  lines = bad.stderr.strip().splitlines()
  assert bad.returncode == 2 and len(lines) == 1 and "choose from tomita1" in lines[0], bad.stderr
