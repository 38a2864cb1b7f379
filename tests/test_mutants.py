"""tests/mutants.json stays runnable: each mutant's text is in its library file once, and the
test files it names exist (a refactor that moves the text must move the mutant with it)."""
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_mutant_changes_text_found_once_and_names_existing_tests():
  mutants = json.load(open(os.path.join(ROOT, "tests", "mutants.json")))
  names = [m["name"] for m in mutants]
  assert len(names) == len(set(names)), "two mutants share a name"
  problems = []
  for m in mutants:
    assert set(m) == {"name", "file", "old", "new", "tests"}, m
    path = os.path.join(ROOT, m["file"])
    found = open(path).read().count(m["old"]) if os.path.isfile(path) else 0
    if found != 1 or m["old"] == m["new"]:
      problems.append(f"{m['name']}: its text is in {m['file']} {found} times")
    files = [t.split("::")[0] for t in m["tests"] if t.startswith("tests/")]  # or -k, ...
    problems += [f"{m['name']}: no {f}" for f in files if not os.path.isfile(os.path.join(ROOT, f))]
  assert not problems, "stale mutants (python tests/mutate.py would report them):\n" + \
      "\n".join(problems)
