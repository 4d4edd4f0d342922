"""The KV-cache calculator on the page: tab (its controls and wiring), answer (one slider position answered),
figures. Its text is in kvviz.i18n.calculator."""
