"""Tried, not kept: the SLO check with every calibration load run twice, both runs fitted. python pc_twice.py DIR 6 2
tiny calibrate --requests 600 (kvviz.sim.plan_check's arguments), from the repository root with PYTHONPATH=. and
kvviz's vLLM set up."""

import sys

from kvviz.sim import calibrate, plan_check

as_made = calibrate.calibrate


def twice(served, points=calibrate.CALIBRATION, say=None):
    return as_made(served, points + points, say)


calibrate.calibrate = twice
plan_check.main(sys.argv[1:])
