"""Predicting a serving engine before running it: a discrete-event simulator of vLLM V1's scheduler.

scheduler (one engine step as vLLM schedules it: running first, a shared token budget, chunked prefill,
preemption by recompute), blocks (the paged KV block pool and its prefix cache), step_time (a step's duration from
what it holds: the linear model, its calibration file and its least-squares fit), workload (closed and open loops,
fixed lengths or a CSV file, a shared prefix), capacity (the blocks from kvviz's memory model), simulate (the event
loop: records, statistics and the step trace, as kvviz.serving's load generator gives them), cli
(`python -m kvviz.sim`); roofline (a GPU preset's step time, a roofline lower bound), plan (capacity under an SLO:
the highest rate one replica holds, the knee, replicas and cost; plan_cli its command, plan_check the same search on
a real vLLM). What is modelled and what is not is in scheduler's docstring. No gradio or plotly; torch
only through the calculator: the memory model, when the capacity comes from a model folder, and a GPU preset's
parameter count (plan, roofline).
"""
