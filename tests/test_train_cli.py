"""launch.train: bad input is refused before any directory is made; finished runs are kept."""
import os

import pytest
import launcher

TINY_FLAGS = ["--task=C2", "--model=mamba", "--d_model=8", "--d_state=2", "--batch_size=8",
              "--steps=20", "--log_every=10", "--checkpoint_every=10", "--eval_seqs=8"]


def train(*args):
  return launcher.run(["launch.train", *args], timeout=300)


@pytest.mark.parametrize("args,needle", [
    (["--task=S9"], "too large"),
    (["--task=banana"], "tasks:"),
    (["--model=mambo"], "choose from mamba"),
    (["--schedule=linear"], "constant"),
    (["--steps=25", "--log_every=10"], "multiple of log_every"),
    (["--eval_length=10", "--train_length=8"], "first length of the evaluation grid"),
    (["--task=A5", "--model=simple_aussm", "--init_from_analytic=0.1"], "pass --model=deltaproduct"),
    (["--task=S3", "--model=mamba", "--depth=2", "--init_from_analytic=0.1"], "simple_aussm"),
])
def test_bad_input_is_one_line_and_leaves_no_directory(tmp_path, args, needle):
  out = train(*args, f"--workdir={tmp_path / 'run'}")
  assert out.returncode != 0
  assert "Traceback" not in out.stderr
  assert needle in out.stderr, out.stderr
  assert not os.path.exists(tmp_path / "run"), "a refused run left a directory behind"


def test_train_then_relaunch_does_not_retrain(tmp_path):
  first = train(*TINY_FLAGS, f"--workdir={tmp_path / 'run'}")
  assert first.returncode == 0, first.stderr
  assert "done: max_len" in first.stdout
  second = train(*TINY_FLAGS, f"--workdir={tmp_path / 'run'}")
  assert second.returncode == 0 and "not retraining" in second.stdout
  # another config in the same workdir is refused, not answered with the stored run's result
  other = train(*TINY_FLAGS, "--task=S3", "--model=rnn", f"--workdir={tmp_path / 'run'}")
  assert other.returncode == 2 and "holds a different run" in other.stderr, (
      f"asked for S3 rnn, got: {other.stdout} {other.stderr}")
  assert "model 'mamba' there, 'rnn' here; task 'C2' there, 'S3' here" in other.stderr, (
      f"the refusal does not name the fields that differ: {other.stderr}")
  assert "done: max_len" not in other.stdout


def test_a_language_run_prints_its_whole_string_accuracy(tmp_path):
  """A language is judged on whole strings: the line reads strings(L) from `seq_acc_curve`."""
  import json
  out = train(*[f for f in TINY_FLAGS if not f.startswith("--task")], "--task=lang-tomita3",
              f"--workdir={tmp_path / 'run'}")
  assert out.returncode == 0, out.stderr
  summary = json.load(open(tmp_path / "run" / "summary.json"))
  want = "  ".join(f"{L}:{summary['seq_acc_curve'][str(L)]:.3f}" for L in (60, 100))
  assert f"strings(L) {want}" in out.stdout, (
      f"want the whole strings' accuracy {want}, got: {out.stdout.splitlines()[-1]}")


@pytest.mark.parametrize("eval_length,want", [(30, ["20"]), (1200, ["60", "100", "200", "500",
                                                                     "1000", "1200"])])
def test_the_done_line_shows_the_longest_length_evaluated(tmp_path, eval_length, want):
  """The line's lengths are 60, 100, 200, 500, 1000 where evaluated, then the longest one: an
  evaluation to 30 printed no accuracy at all, and one past 1000 not its end."""
  out = train(*TINY_FLAGS, "--train_length=16", f"--eval_length={eval_length}",
              f"--workdir={tmp_path / 'run'}")
  assert out.returncode == 0, out.stderr
  line = out.stdout.splitlines()[-1]
  shown = line.split("acc(L) ")[1].split("  steps")[0].split()
  assert [s.split(":")[0] for s in shown] == want, line


def test_init_from_analytic_trains_near_the_construction(tmp_path):
  out = train("--task=C6", "--model=simple_aussm", "--init_from_analytic=0.0", "--lr=1e-5",
              "--steps=20", "--log_every=10", "--checkpoint_every=10", "--eval_seqs=16",
              "--batch_size=8", f"--workdir={tmp_path / 'run'}")
  assert out.returncode == 0, out.stderr
  assert "max_len 1000" in out.stdout, out.stdout


@pytest.mark.parametrize("flag", ["--model", "--layers"])  # --layers: its alias for lists
def test_a_hybrid_stack_trains_at_the_depth_its_list_gives(tmp_path, flag):
  """--model=s4d,mamba is a depth-2 stack whatever the preset's depth (no --depth needed)."""
  import json
  out = train(*[f for f in TINY_FLAGS if not f.startswith("--model")], f"{flag}=s4d,mamba",
              f"--workdir={tmp_path / 'run'}")
  assert out.returncode == 0, out.stderr[-2000:]
  cfg = json.load(open(tmp_path / "run" / "summary.json"))["config"]
  assert (cfg["model"], cfg["depth"]) == ("s4d,mamba", 2), (cfg["model"], cfg["depth"])
