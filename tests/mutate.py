"""Mutation check of the test suite: each mutant in tests/mutants.json (a one-place change to the
library that breaks a behaviour SPEC or the README names) must make the tests it lists fail.

    python tests/mutate.py [--only REGEX] [--mutants FILE]   # from the repository root

A mutant takes half a minute to a minute of one core here, so all of tests/mutants.json hours. `--mutants` runs another file of
the same form (a draft of new mutants, before they join tests/mutants.json).

Each mutant is applied in a fresh clone of HEAD (never in this working tree), its tests run there
in one process (`python -m pytest -x`, so the clone's packages come first on the path), and the
file is restored. Prints CAUGHT or SURVIVED per mutant; exits 1 if any survived. Not part of CI:
a developer runs it after changing tests, and adds a mutant with each test that a mutation
showed missing (BUILD_NOTES, "Tests and CI")."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--only", default="", help="run the mutants whose name matches this regex")
  parser.add_argument("--mutants", default=os.path.join(HERE, "mutants.json"),
                      help="a JSON list of mutants (name, file, old, new, tests)")
  args = parser.parse_args()
  mutants = [m for m in json.load(open(args.mutants))
             if re.search(args.only, m["name"])]
  survived = []
  with tempfile.TemporaryDirectory(prefix="ssm-bench-mutants-") as tmp:
    clone = os.path.join(tmp, "repo")
    subprocess.run(["git", "clone", "-q", os.path.dirname(HERE), clone], check=True)
    for m in mutants:
      path = os.path.join(clone, m["file"])
      src = open(path).read()
      if src.count(m["old"]) != 1:
        print(f"STALE     {m['name']}: its text is not found once in {m['file']}", flush=True)
        survived.append(m["name"])
        continue
      with open(path, "w") as f:
        f.write(src.replace(m["old"], m["new"]))
      try:
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-n", "0", "-p",
                            "no:cacheprovider", *m["tests"]], cwd=clone, capture_output=True,
                           text=True, timeout=900)
      finally:
        with open(path, "w") as f:
          f.write(src)
      last = ([l for l in r.stdout.splitlines() if l.strip()] or ["(no output)"])[-1]
      caught = r.returncode == 1  # tests failed (not: collection or usage errors, 2-5)
      print(f"{'CAUGHT   ' if caught else 'SURVIVED '} {m['name']}: {last}", flush=True)
      if not caught:
        survived.append(m["name"])
  print(f"{len(mutants) - len(survived)} of {len(mutants)} mutants caught"
        + (f"; survived or stale: {', '.join(survived)}" if survived else ""))
  sys.exit(1 if survived else 0)


if __name__ == "__main__":
  main()
