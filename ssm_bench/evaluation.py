"""Length-generalisation evaluation: one forward pass at full length yields every acc(L).

acc(L) = fraction of evaluation sequences whose prediction at position L equals y_L (a task
with a window w: the mean accuracy over positions L-w+1..L).
max_len = the largest grid L with acc(l) > 0.9 for every grid l <= L (0 if none).
"""
from __future__ import annotations

import functools

import jax
import numpy as np

from ssm_bench.config import GRID_STEP

EVAL_SEED = 20260301  # one fixed evaluation stream shared by every model
EVAL_LENGTH = 1000  # the default evaluation length (TrainConfig.eval_length)
THRESHOLD = 0.9


def grid(length: int = EVAL_LENGTH) -> tuple:
  """Evaluation lengths: every 20 up to 1000, then every 200 (a 10,000-step curve stays short)."""
  fine = tuple(range(GRID_STEP, min(length, 1000) + 1, GRID_STEP))
  return fine + tuple(range(1200, length + 1, 200))


GRID = grid()


@functools.lru_cache(maxsize=16)
def _sampler(task):
  return jax.jit(task.sample, static_argnums=(1, 2, 3))


def eval_set(task, num_seqs: int, length: int = EVAL_LENGTH, stream: str | None = None,
             seed: int = EVAL_SEED):
  """The fixed evaluation batch: same seed, same sequences, for every model and run; on the
  task's main stream unless `stream` names another (a `-gen` task has no uniform one)."""
  return _sampler(task)(jax.random.PRNGKey(seed), num_seqs, length, stream or task.main_stream)


def make_correctness_fn(apply_fn, chunk: int):
  """jit(params, tokens, labels, *args) -> bool (num_seqs, length), in batch chunks of `chunk`;
  `args` go to apply_fn after the tokens, as traced values (a padded task's class count: one
  program evaluates every task of a mixed group).

  The chunks run under lax.map inside one compiled function, so the state tensor of only one
  chunk is alive at a time and no length or chunk count triggers a second compile.
  """
  @jax.jit
  def correct(params, tokens, labels, *args):
    b, t = tokens.shape
    tok = tokens.reshape(b // chunk, chunk, t)
    lab = labels.reshape(b // chunk, chunk, t)
    out = jax.lax.map(lambda xy: apply_fn(params, xy[0], *args).argmax(-1) == xy[1], (tok, lab))
    return out.reshape(b, t)
  return correct


def curves(correct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Per-position accuracy and full-prefix (sequence) accuracy, both (length,)."""
  correct = np.asarray(correct)
  return correct.mean(0), np.cumprod(correct, axis=1).mean(0)


def at_length(correct: np.ndarray) -> dict:
  """A construction's check at its full length: the share of sequences right at every position
  (`accuracy`), the share right at the last position (`acc_at_length`), and the first position
  (1-based) where some sequence is wrong (`first_error`, None where none is)."""
  correct = np.asarray(correct)
  per_pos, seq = curves(correct)
  wrong = np.nonzero(~correct.all(0))[0]
  return {"accuracy": float(seq[-1]), "acc_at_length": float(per_pos[-1]),
          "first_error": int(wrong[0]) + 1 if wrong.size else None}


def on_grid(per_position: np.ndarray, window: int = 1) -> dict:
  """{"20": acc(20), ...} over grid(len(per_position)): string keys, so it is JSON as it is.
  With `window` > 1, acc(L) is the mean over the `window` positions ending at L: a stream with
  periodic structure (a formal language: (aa)*, flip-flop's instruction/bit pairs) would
  otherwise be scored on one phase only, since every grid length is a multiple of 20."""
  per_position = np.asarray(per_position)
  return {str(L): float(per_position[max(0, L - window):L].mean())
          for L in grid(len(per_position))}


def max_len(acc_curve: dict, threshold: float = THRESHOLD) -> int:
  """Largest grid L with acc(l) > threshold for every grid l <= L; 0 if the first fails."""
  best = 0
  for L in sorted(acc_curve, key=int):
    if not acc_curve[L] > threshold:
      break
    best = int(L)
  return best


def scored(task, correct: np.ndarray) -> dict:
  """A stream's correctness (num_seqs, length) scored as `task` is: per-position and whole-prefix
  curves on the grid, and max_len from the one the task is judged by (`Task.whole_strings`)."""
  per_pos, seq = curves(correct)
  acc, seq_acc = on_grid(per_pos, task.acc_window), on_grid(seq)
  return {"per_pos": per_pos, "seq": seq, "acc_curve": acc, "seq_acc_curve": seq_acc,
          "max_len": max_len(seq_acc if task.whole_strings else acc)}


def event_accuracy(correct: np.ndarray, masks: dict) -> dict:
  """{event: accuracy over the positions its mask marks (None where it marks none)}."""
  correct = np.asarray(correct)
  out = {}
  for name, mask in masks.items():
    mask = np.asarray(mask)
    out[name] = float(correct[mask].mean()) if mask.any() else None
  return out


def example_output(apply_fn, params, tokens, labels) -> dict:
  """The first evaluation sequence with the model's probability of each class-1 label: what a
  figure of output against signal needs (next-token tasks with a binary signal)."""
  probs = jax.nn.softmax(apply_fn(params, tokens[:1]), axis=-1)[0, :, 1]
  return {"tokens": np.asarray(tokens[0]).tolist(), "labels": np.asarray(labels[0]).tolist(),
          "p1": [round(float(p), 4) for p in np.asarray(probs)]}
