"""Benchmarks of kvviz's own figures, one module per part of what the app claims.

overhead (loop overhead, load times), payoff (cached against uncached), memory_truth (measured cache bytes
against the prediction), hardware (the measured ceiling), responsiveness (calculator and app), gpu (parts
1-4 on CUDA in one run), figures (plotly, the only module that needs more than torch, transformers, pandas
and kvviz's core), cli (`python -m kvviz.bench`). Results are CSV + JSON with the machine and command.
"""
