"""Static batching with kvviz's own engine: tab, run_text and run_figures (one batch run), sweep_text and
sweep_figures (the batch sweep over B). Its text is in kvviz.i18n.batch."""
