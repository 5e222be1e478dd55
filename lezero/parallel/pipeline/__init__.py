"""Pipeline parallelism: schedules as data, simulated, checked, drawn, and run.

* ``schedule.py``: ``Op``, ``Schedule``, ``gpipe``, ``one_f_one_b``,
  ``interleaved_one_f_one_b``, ``bubble_theory``;
* ``simulate.py``: ``simulate`` (bubble, peak activations, bytes), ``check_schedule``
  (deadlock and structure), ``ScheduleError``;
* ``draw.py``: ``timeline_text``, ``plot_timeline``;
* ``engine.py``: ``Pipeline``, which runs a checked schedule over send/recv
  (``transport.py``); ``stages.py`` cuts an ``nn.Sequential`` into stages.
"""
from lezero.parallel.pipeline.draw import plot_timeline, timeline_text
from lezero.parallel.pipeline.engine import Pipeline
from lezero.parallel.pipeline.schedule import (Op, Schedule, bubble_theory, gpipe,
                                               interleaved_one_f_one_b, make_schedule,
                                               one_f_one_b)
from lezero.parallel.pipeline.simulate import (ScheduleError, SimResult, check_schedule,
                                               simulate)
from lezero.parallel.pipeline.stages import SequentialStage, split_sequential

__all__ = ["Pipeline", "Op", "Schedule", "gpipe", "one_f_one_b", "interleaved_one_f_one_b",
           "make_schedule", "bubble_theory", "simulate", "check_schedule", "ScheduleError",
           "SimResult", "timeline_text", "plot_timeline", "SequentialStage",
           "split_sequential"]
