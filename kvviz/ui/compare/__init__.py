"""Cached against uncached on one prompt: tab, text (the verdict and the modes' table). Its figures are
generation's (one run's latency, drawn per mode). Its text is in kvviz.i18n.compare."""
