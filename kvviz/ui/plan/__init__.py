"""Planning a deployment with the simulator: tab, predict (the page's values into a simulated replica, its curves
and plan, measured runs set against them), text, figures. Its text is in kvviz.i18n.plan."""
