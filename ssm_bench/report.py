"""Every table made from run summaries beside Table 2, as one list: which finished runs each
reads, its data, its Markdown and its file. `launch.tables` writes them all, a sweep prints
those its own runs fill, and the runs that none of them nor Table 2 reads go to OTHER
(`other_runs.py`), so that no stored run goes unreported.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ssm_bench import language_table
from ssm_bench import neighbours
from ssm_bench import other_runs
from ssm_bench import tables
from ssm_bench import tracking_profile


@dataclasses.dataclass(frozen=True)
class Table:
  key: str  # its data's key (launch.tables' JSON)
  file: str  # its Markdown file under launch.tables' --out
  title: str
  intro: str
  takes: Callable[[dict], bool]  # a finished run's summary -> whether this table reads it
  data: Callable[[list], Any]  # the summaries it takes -> its data (empty: no table)
  markdown: Callable[[Any], str]
  # The config fields its cells show or pool over; every other field is the run's protocol, and
  # the table is one table per protocol (as Table 2), so runs trained under other presets, step
  # budgets or widths never share a row. None: the data keeps protocols apart itself.
  axes: tuple | None = None

  def build(self, summaries) -> Any:
    """Its data from the summaries it takes: {protocol: data} when it has axes."""
    if self.axes is None:
      return self.data(summaries)
    built = {p: self.data(runs) for p, runs in tables.by_protocol(summaries, self.axes).items()}
    return {p: d for p, d in built.items() if d}

  def render(self, data) -> str:
    if self.axes is None:
      return self.markdown(data)
    return "\n".join(f"### Protocol: {p}\n\n{self.markdown(d).rstrip()}\n" for p, d in data.items())


# Every table's rows name a layer at its kwargs (neighbours.layer_label), so those are axes too.
_AXES = tables.CELL_FIELDS + ("layer_kwargs",)


TABLES = (
    Table("profile", "profile.md", "# State-tracking profiles (SPEC 7)", tracking_profile.INTRO,
          tracking_profile.takes, tracking_profile.profile_data, tracking_profile.markdown),
    Table("languages", "languages.md", "# Formal languages (Sarrof et al. 2024)",
          language_table.INTRO, language_table.takes, language_table.language_data,
          language_table.markdown, _AXES),
    Table("illusion", "illusion.md",
          "# Minimal depth reaching > 90% accuracy at each training length (paper 002, Fig. 3)",
          "A cell is the minimal depth whose held-out sequence accuracy (every position right, "
          "at the training length) exceeds 0.9; deeper stacks are not trained once a shallower "
          "one solved the length. '> D (a)': no depth up to D did, the best reaching a. "
          "Figures: illusion_depth_PROTOCOL.png, one per protocol.",
          neighbours.takes_illusion, neighbours.illusion_data, neighbours.illusion_markdown,
          _AXES + ("train_length", "curriculum_start")),
    Table("parity", "parity.md",
          "# Parity with S4D, Mamba, their hybrid, negmamba and an RNN (paper 001, Table 1)",
          "Training accuracy: on the last training batch (median over runs). At L: accuracy at "
          "position L, the evaluation length, on each stream: the median over runs, then (runs "
          f"above {neighbours.SOLVED} / runs); chance is 0.5. Adversarial: (0^k 1^m)^*.",
          neighbours.takes_parity, neighbours.parity_data, neighbours.parity_markdown,
          _AXES + ("eval_length",)),
    Table("near_solution", "near_solution.md",
          "# Trained from near a hand-built construction (paper 000, Sec. 6: AUSSM on S3)",
          "max_len per initialisation: the construction plus Gaussian noise of the given std on "
          "every parameter, or the same network from a default initialisation.",
          neighbours.takes_near_solution, neighbours.near_solution_data,
          neighbours.near_solution_markdown, _AXES + ("init_from_analytic", "train_length")),
    Table("offset", "offset.md", "# Offset prediction (paper 001, Sec. 5 and App. C)",
          "Next-token accuracy (median over runs) at all positions and by kind of position: "
          "inside an ISI (next is 1), its offset (the last ISI step, next is 0), onsets (the last "
          "ITI step, next is 1: unpredictable before 40 zeros) and the rest of the ITI. Streams: "
          "the training distribution (cycles), two ISIs with a longer-than-trained gap (two_isi), "
          "an ISI followed at once by another (double_isi: the true next token after the first "
          "ISI is 1, so a model that counts scores 0 there). Figures: example_offset_*.png.",
          neighbours.takes_offset, neighbours.offset_data, neighbours.offset_markdown, _AXES),
)


def read_elsewhere(summary) -> bool:
  """Whether Table 2 or a table of TABLES reads this finished run."""
  return tables.takes(summary) or any(t.takes(summary) for t in TABLES)


OTHER = Table("other", "other_runs.md", "# Runs in no other table", other_runs.INTRO,
              lambda s: not read_elsewhere(s), other_runs.other_data, other_runs.markdown)


def build(finished) -> dict:
  """{Table: its data} for TABLES and OTHER, from finished (done or diverged) summaries."""
  return {t: t.build([s for s in finished if t.takes(s)]) for t in TABLES + (OTHER,)}


def file_text(table: Table, data, notes=()) -> str:
  """The table's Markdown file: title, intro, any notes, the table."""
  lines = [table.title, "", table.intro, ""] + list(notes) + [table.render(data)]
  return "\n".join(lines).rstrip("\n") + "\n"


def sweep_table(runs_dir: str, only=None) -> str:
  """What a sweep prints when it finishes: Table 2 and every other table of its own runs
  (`only`, their directory names, where the run directory also holds other sweeps' runs), then
  the runs not done."""
  rs = tables.load(runs_dir, only)
  parts = [tables.markdown_table2(tables.table2_data(rs))]
  for t, data in build(rs.good + rs.diverged).items():
    if data:
      parts += [t.title, "", t.render(data).rstrip("\n"), ""]
  parts.append(tables.problems_markdown(rs))
  return "\n".join(parts)
