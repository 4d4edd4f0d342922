"""Tried, not kept: the SLO check with the check's own lengths (128/16, closed loops of 1, 2, 4 and 8 in flight) added
to the calibration's loads. python pc_plus.py DIR 6 2 tiny calibrate --requests 120 (kvviz.sim.plan_check's
arguments), from the repository root with PYTHONPATH=. and kvviz's vLLM set up."""

import sys

from kvviz.sim import calibrate, plan_check
from kvviz.sim.calibrate import LoadPoint, Mix

SHAPE = tuple(LoadPoint(Mix(128, 16), n, concurrency=c) for c, n in ((1, 4), (2, 8), (4, 16), (8, 24)))
as_made = calibrate.calibrate


def with_shape(served, points=calibrate.CALIBRATION, say=None):
    return as_made(served, points + SHAPE, say)


calibrate.calibrate = with_shape
plan_check.main(sys.argv[1:])
