"""Tried, not kept: the SLO check with lone prompts of 384 and 960 tokens (closed loops of one, 3 requests each) added
to the calibration's loads. python pc_lone.py DIR 6 2 tiny calibrate --requests 600 (kvviz.sim.plan_check's
arguments), from the repository root with PYTHONPATH=. and kvviz's vLLM set up."""

import sys

from kvviz.sim import calibrate, plan_check
from kvviz.sim.calibrate import LoadPoint, Mix

LONE = (LoadPoint(Mix(384, 8), 3, concurrency=1), LoadPoint(Mix(960, 8), 3, concurrency=1))
as_made = calibrate.calibrate


def with_lone(served, points=calibrate.CALIBRATION, say=None):
    return as_made(served, points + LONE, say)


calibrate.calibrate = with_lone
plan_check.main(sys.argv[1:])
