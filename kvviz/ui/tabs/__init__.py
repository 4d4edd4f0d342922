"""The app's tabs, one builder each: it lays out its components, wires its own events, and returns the
handles kvviz.ui.app needs to connect it to the other tabs."""
