"""kvviz's user interface: figures (plotly specs), tab handlers and the Gradio app. The core never imports this."""
