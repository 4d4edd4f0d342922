"""Live generation and what follows one run: tab (the live-generation tab), live (a run's record as it streams),
text (its metrics in words), figures, lifecycle_tab (the latest run on one time axis), history_tab and history (every
run of the session). Its text is in kvviz.i18n.generation."""
