"""The Scheduler tab: a simulated run of vLLM's scheduler played step by step in the browser, and beside it the
same load on the local vLLM, its /metrics against the simulator's."""
