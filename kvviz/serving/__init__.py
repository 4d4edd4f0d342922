"""Serving under load: kvviz measures a real inference server (vLLM, SGLang, any OpenAI-compatible endpoint)
from outside, over HTTP, and starts vLLM itself for its own models.

endpoint (where the load goes, the key, the one error type), prompts (synthetic, with a shared prefix, or
from a file), load (what a load is), http1 (the load's small HTTP/1.1 client), stamped (sockets whose reads
carry the kernel's receive time), sse (one streamed request, read cheaply), record (what one request
measured), loadgen (closed and open loops, bounded and cancellable), overhead (the client's own cost and
whether it limited a run), stats (a run's figures, as vLLM's benchmark defines them), sweep (one in flight up
to saturation, or to where the client limits it), timed_server (a server whose timings are known by
construction: the load generator's truth), metrics_reader (the server's /metrics, polled, beside kvviz's KV
prediction), vllm (set up, start and stop vLLM), guardian (the process that stops vLLM when kvviz ends,
however it ends), models (the folders it serves), capacity (vLLM's KV capacity against kvviz's), local (the
one vLLM an app starts and stops), live (a load, sweep or prefix-cache experiment on a thread, followed while
it runs), engine_load (the same closed loop on kvviz's own engine, one request at a time), cli (`python -m
kvviz.serving`). Nothing here imports gradio or plotly.
"""
