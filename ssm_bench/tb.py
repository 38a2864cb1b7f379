"""TensorBoard event files without TensorFlow: scalars and the HParams dashboard's protos."""
from __future__ import annotations

import time

from tensorboard.compat.proto import event_pb2
from tensorboard.compat.proto import summary_pb2
from tensorboard.plugins.hparams import api_pb2
from tensorboard.plugins.hparams import metadata as hp_metadata
from tensorboard.plugins.hparams import plugin_data_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter


class Writer:
  """One event file per process per run directory."""

  def __init__(self, logdir: str):
    self._writer = EventFileWriter(logdir)

  def _write(self, values, step: int):
    event = event_pb2.Event(wall_time=time.time(), step=int(step),
                            summary=summary_pb2.Summary(value=values))
    self._writer.add_event(event)

  def restart(self, step: int):
    """A resumed run: TensorBoard drops every point an earlier process logged at `step` or later
    (a SessionLog START purges steps >= its own), which this process logs again."""
    self._writer.add_event(event_pb2.Event(
        wall_time=time.time(), step=int(step),
        session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START)))

  def scalars(self, step: int, values: dict):
    self._write([summary_pb2.Summary.Value(tag=k, simple_value=float(v)) for k, v in values.items()],
                step)

  def curve(self, tag: str, points: dict):
    """A curve such as accuracy vs length: one scalar per x, with x as the step."""
    for x, y in sorted(points.items(), key=lambda kv: int(kv[0])):
      self.scalars(int(x), {tag: y})

  def _plugin(self, tag: str, data: plugin_data_pb2.HParamsPluginData):
    meta = hp_metadata.create_summary_metadata(data)
    self._write([summary_pb2.Summary.Value(tag=tag, metadata=meta, tensor=hp_metadata.NULL_TENSOR)], 0)

  def hparams(self, hparams: dict, metrics: list[str]):
    """The experiment definition and this run's session, for the HParams table (tensorboard's
    own builders; no TensorFlow needed)."""
    from tensorboard.plugins.hparams import summary_v2
    config = summary_v2.hparams_config_pb(hparams=[summary_v2.HParam(k) for k in hparams],
                                          metrics=[summary_v2.Metric(m) for m in metrics])
    session = summary_v2.hparams_pb(hparams, start_time_secs=time.time())
    for pb in (config, session):
      self._writer.add_event(event_pb2.Event(wall_time=time.time(), step=0, summary=pb))

  def end_session(self, ok: bool):
    end = plugin_data_pb2.SessionEndInfo(
        status=api_pb2.STATUS_SUCCESS if ok else api_pb2.STATUS_FAILURE, end_time_secs=time.time())
    self._plugin(hp_metadata.SESSION_END_INFO_TAG, plugin_data_pb2.HParamsPluginData(
        session_end_info=end, version=hp_metadata.PLUGIN_DATA_VERSION))

  def close(self):
    self._writer.flush()
    self._writer.close()
