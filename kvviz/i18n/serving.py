"""The Serving tab's texts: its controls and intro, its status lines and refusals, what its results say
(kvviz.ui.serving.text) and its figures' titles, axes, legend names and hover texts (kvviz.ui.serving.figures).

Hover texts are plotly templates (%{x}): those filled with fields here write plotly's braces doubled (%{{x}}),
as str.format wants; those used without fields keep them single.
"""

from __future__ import annotations

from kvviz.i18n import register

EN = {
    # --- the tab's controls (static, through L) ---
    "serving.intro": """
A request's life on a real server (the lesson's question 1): the client sends it over HTTP, the server queues
it, prefills its prompt, streams each token as it is decoded, and ends the stream. Here kvviz loads a real
engine with many such requests at once, as a service sees them, and measures each one from the client (TTFT,
every token's arrival, E2E) while reading the server's own view from its Prometheus `/metrics` (requests
running and waiting, KV-cache usage, its queue, prefill and decode times). A **sweep** raises the requests in
flight 1, 2, 4, ... until throughput stops growing: the curves show what continuous batching trades (questions
5 and 6). Start vLLM here (with no vLLM environment yet, the tab offers to set one up), or point the tab at a server.
""",
    "serving.target": "target",
    "serving.target.local": "local vLLM (kvviz starts it)",
    "serving.target.remote": "an OpenAI-compatible endpoint",
    "serving.local_model": "model vLLM serves",
    "serving.kv_space": "KV-cache space, GiB per rank (vLLM's CPU build)",
    "serving.tp": "tensor parallel",
    "serving.pp": "pipeline parallel",
    "serving.dp": "data parallel",
    "serving.start_vllm": "Start vLLM",
    "serving.stop_vllm": "Stop vLLM",
    "serving.endpoint_hosted": "endpoint (what this demo allows)",
    "serving.endpoint_url": "endpoint URL (with or without /v1)",
    "serving.served": "model name the server serves (its /v1/models)",
    "serving.api": "API",
    "serving.api_key": "API key (or set KVVIZ_API_KEY); never logged or saved",
    "serving.tokenizer": "the served model's local folder (counts prompt tokens, predicts KV usage; optional)",
    "serving.kind": "what to run",
    "serving.kind.one": "one load",
    "serving.kind.sweep": "sweep",
    "serving.kind.prefix": "prefix-cache experiment",
    "serving.load": "load",
    "serving.arrivals": "arrivals (one load)",
    "serving.arrivals.closed": "closed loop: fixed requests in flight",
    "serving.arrivals.poisson": "open loop: Poisson arrivals at a rate",
    "serving.arrivals.constant": "open loop: evenly spaced at a rate",
    "serving.concurrency": "requests in flight (at most)",
    "serving.rate": "request rate, requests/s (open loop)",
    "serving.prompt_tokens": "prompt tokens",
    "serving.shared_prefix": "of which shared by every prompt (prefix)",
    "serving.output_tokens": "output tokens per request (ignore_eos)",
    "serving.requests": "requests in all (one load, each experiment run)",
    "serving.duration": "stop sending after, s",
    "serving.max_concurrency": "sweep: last level",
    "serving.per_level": "sweep: requests per slot at each level",
    "serving.slo_ttft": "SLO: TTFT ≤ s",
    "serving.slo_tpot": "SLO: TPOT ≤ s",
    "serving.start": "Start",
    "serving.stop": "Stop",
    "serving.engine_box": "the same load on kvviz's own engine, one request at a time",
    "serving.engine_button": "Run the last load on kvviz's engine",
    "serving.json_box": "this job as JSON (no API key)",
    "serving.json": "job",
    # --- the tab's status lines and refusals ---
    "serving.live.level": " at {concurrency} in flight",
    "serving.live.done": "; {runs} run(s) finished",
    "serving.live.status": "running {kind}{level}: {seconds} s, {ended} request(s) ended, {chunks} output chunks{done}",
    "serving.final.status": "{kind} finished: {runs} run(s), {requests} request(s)",
    "serving.final.no_sweep": "run a sweep to draw the curves",
    "serving.final.no_prefix": "the prefix-cache experiment draws here",
    "serving.final.stopped": "**Stopped**: the figures cover what ran before Stop.\n\n",
    "serving.refuse.hosted_vllm": "this hosted demo keeps its vLLM serving for every visitor",
    "serving.refuse.hosted_setup": "this hosted demo does not set up vLLM: its operator does, from a terminal "
                                   "(`python -m kvviz.serving setup`)",
    # --- setting vLLM's environment up from the page (kvviz.serving.setup) ---
    "serving.plots_hint": "*The plots below fill in while a load runs: start vLLM (or pick an endpoint), then "
                          "**Start**.*",
    "serving.setup.button": "Set up vLLM (about 3.5 GB, a few minutes)",
    "serving.setup.stop": "Stop the set-up",
    "serving.setup.offer": "**No vLLM environment** at `{venv}`. Set it up here: vLLM's CPU build and its own "
                           "torch installed into a virtual environment of its own (about 3.5 GB on disk), a "
                           "few minutes (5 to 12 on 2 busy CPU cores). Or from a terminal: "
                           "`python -m kvviz.serving setup`.",
    "serving.setup.hosted_missing": "This demo's host has no vLLM environment (its operator sets it up): point the "
                                    "tab at an endpoint instead.",
    "serving.setup.running": "**Setting up vLLM**: {line}.  \nIts log: `{log}`. Stop ends pip and removes what it "
                             "had made.",
    "serving.setup.failed": "**The set-up failed**: {why}.  \nSet it up again, or from a terminal: "
                            "`python -m kvviz.serving setup`.",
    "serving.setup.done": "**{line}**.  \nStart vLLM now.",
    "serving.setup.stopped": "**{line}**.",
    "serving.refuse.no_run": "stopped before any run ended",
    "serving.refuse.local_first": "run a load on the local vLLM serving {spec} first: the comparison runs that same "
                                  "load on kvviz's engine",
    "serving.refuse.closed_only": "kvviz's engine takes closed-loop loads (fixed requests in flight); run one on "
                                  "vLLM first",
    "serving.engine_run": "the engine's run",
    "serving.source.vllm": "vLLM (continuous batching)",
    "serving.source.engine": "kvviz engine (one at a time)",
    # --- a run's text (kvviz.ui.serving.text) ---
    "serving.stats.header": "| completed | failed | output tokens/s | requests/s | goodput (requests/s within the SLO) "
                            "| duration |",
    "serving.stats.row": "| {completed} of {requests} | {failed} | {tokens_per_s} | {requests_per_s} | {goodput} "
                         "(TTFT ≤ {slo_ttft}, TPOT ≤ {slo_tpot}) | {duration} s |",
    "serving.latency.header": "| latency | mean | p50 | p90 | p99 |",
    "serving.latency.ttft": "TTFT (time to first token)",
    "serving.latency.tpot": "TPOT (time per output token)",
    "serving.latency.itl": "ITL (gap between chunks)",
    "serving.latency.e2e": "E2E (whole request)",
    "serving.kv.predicted": " (kvviz predicted {pct})",
    "serving.kv.peak": "peak KV-cache usage {pct}{predicted}",
    "serving.server.phases": "per request, queued {queued}, prefill {prefill}, decode {decode}",
    "serving.server.ttft": "TTFT mean {server} on the server against {client} at the client (the difference: HTTP, "
                           "tokenization and streaming)",
    "serving.server.prefix": "prefix-cache hits {pct} of the prompt tokens looked up",
    "serving.server.preemptions": "{count} preemptions",
    "serving.server.queue": "at most {running} running and {waiting} waiting",
    "serving.server.sep": "; ",
    "serving.server.line": "**The server's view** (its /metrics): {parts}.",
    "serving.run.metrics_error": "The server's metrics could not be read: {error}",
    "serving.run.failed": "**{failed} request(s) failed**; the first: {error}",
    "serving.run.cancelled": "*Cancelled: the requests in flight were recorded as failed.*",
    "serving.client.line": "**The client's own cost**: CPU {cpu} s ({busy} of a core, {per_token} µs per output "
                           "token); its reads waited {wait} (p50/p90) after the bytes arrived, and {joined} of the "
                           "output chunks came in one read with a later one (their gap reads 0); response headers "
                           "{headers} (p50) after each send. Times are the kernel's receive stamps, so this cost "
                           "does not enter TTFT or E2E.",
    "serving.client.limited": "**Warning: the client, not the server, limited this run** ({why}): its throughput "
                              "understates the server's.",
    "serving.client.busy": "its event loop was busy {busy} of the run, over {limit}",
    "serving.client.late": "its reads waited {wait} at p90, over {share} of a request's {e2e}",
    "serving.client.sep": "; ",
    "serving.rate.line": "**Open loop**: {asked} requests/s asked, {sent} sent, {completed} completed. {cap}",
    "serving.rate.free": "The cap of {cap} in flight (at most {carried} requests/s at these requests' duration) never "
                         "held an arrival back.",
    "serving.rate.held": "The cap of {cap} in flight held back {held} of {requests} arrivals in bursts (mean wait "
                         "{wait}); it carries at most {carried} requests/s, more than the rate asked.",
    "serving.rate.bound": "**The cap of {cap} in flight bounded the rate**: it held back {held} of {requests} "
                          "arrivals (mean wait {wait}) and carries at most {carried} requests/s at these requests' "
                          "duration (Little's law: cap / mean E2E), less than the rate asked.",
    # --- a sweep's text ---
    "serving.q5.from_nothing": "from nothing",
    "serving.q5.users": " (each user's decode speed from {first} to {top} tokens/s)",
    "serving.q5.text": "**Q5: what TTFT, TPOT and throughput measure, and how they trade** ({question}) TTFT is how "
                       "long a user waits for the first token (queueing + prefill); TPOT is how fast the rest streams "
                       "to that user (one decode step); throughput is what the server produces for everyone "
                       "together. From {first} to {top} in flight, total output throughput went from {first_tps} to "
                       "{top_tps} tokens/s ({gain}) while each user's TPOT p50 went from {first_tpot} to "
                       "{top_tpot}{users} and TTFT p50 from {first_ttft} to {top_ttft}. {reading}",
    "serving.q5.batching": "Batching shares each read of the weights among more requests, so a server makes more "
                           "tokens per step.",
    "serving.q5.batching_slower": "Batching shares each read of the weights among more requests, so the server makes "
                                  "more tokens per step while each step, and so each user's next token, takes longer "
                                  "({ratio}× the TPOT): throughput bought with each user's speed.",
    "serving.q5.batching_free": "Batching shares each read of the weights among more requests, so the server makes "
                                "more tokens per step; here each user's TPOT did not grow with it: the steps were "
                                "still bound by fixed costs per step (scheduling, the read of the weights), not by "
                                "the batch, so batching was nearly free. Past that point a step's work grows with "
                                "the batch and TPOT rises.",
    "serving.saturation.growing": "Throughput was still growing at the sweep's last level ({last} in flight, "
                                  "{tokens_per_s} tokens/s): the server was not saturated yet.",
    "serving.saturation.stopped": "Throughput stopped growing at about {level} in flight ({tokens_per_s} tokens/s): "
                                  "the best level, {best} in flight, made {best_tps} tokens/s, {more} more, while "
                                  "TTFT p50 went from {ttft} to {best_ttft}. Past saturation more requests in flight "
                                  "only wait longer.",
    "serving.q6.text": "**Q6: first token slow, later tokens fast: what to check first** ({question}) Queueing, "
                       "prefill and scheduling, which TTFT includes and TPOT does not. Here TTFT p50 grew from "
                       "{first_ttft} at {first} in flight to {last_ttft} at {last} (p99 {last_p99}), TPOT p50 from "
                       "{first_tpot} to {last_tpot}.",
    "serving.q6.no_metrics": " The server's metrics were not read, so its queue cannot be seen here.",
    "serving.q6.level": "{concurrency} in flight (up to {waiting})",
    "serving.q6.sep": ", ",
    "serving.q6.queued": " The server had requests waiting at {levels}: they queued before their prefill.",
    "serving.q6.no_queue": " The server never had a request waiting, so the growth is not its queue: a new "
                           "request's prefill shares the scheduler's steps with the others' decode.",
    "serving.q6.top": " At {concurrency} in flight the server's mean request queued {queued} and was prefilled in "
                      "{prefill}; a long prompt lengthens the prefill, and the scheduler's batch limits "
                      "(max-num-seqs, the token budget per step) the queue.",
    "serving.sweep.client": "**The sweep stopped at {concurrency} in flight because the client saturated there** "
                            "(its event loop was the bottleneck): levels beyond it would measure the client. Its "
                            "throughput is a floor for the server's.",
    "serving.sweep.none": "No sweep yet.",
    "serving.sweep.one": "One level only ({concurrency} in flight): the trade-offs of questions 5 and 6 show from two "
                         "levels on.",
    # --- a shared prefix, the engine beside vLLM ---
    "serving.change.plain": "from {before} to {after}",
    "serving.change.delta": "from {before} to {after} ({delta} ms{relative})",
    "serving.change.relative": ", {relative}",
    "serving.prefix.no_hits": "The server reported no prefix-cache hits.",
    "serving.prefix.hits": "With the shared prefix, {with_} of the prompt tokens the server looked up were already "
                           "in its prefix cache (without it: {without}).",
    "serving.prefix.prefill": " The server's mean prefill went {change}.",
    "serving.prefix.text": "{hits} TTFT p50 went {ttft}.{prefill} Tokens found in the cache skip prefill: their "
                           "keys and values are already stored.",
    "serving.engine.many": "**The same load, {concurrency} in flight, {requests} requests of {tokens} tokens.** vLLM "
                           "(continuous batching): {s_tps} tokens/s, TTFT p50 {s_ttft}, TPOT p50 {s_tpot}. kvviz's "
                           "engine (one request at a time): {e_tps} tokens/s, TTFT p50 {e_ttft}, TPOT p50 {e_tpot}. "
                           "Batching made {ratio} the tokens per second: each of vLLM's steps decodes every running "
                           "request at once, one read of the weights for all of them, while kvviz's engine runs the "
                           "requests in turn, so its TPOT is one request's alone and its TTFT includes waiting for "
                           "the {ahead} request(s) ahead of it to finish.",
    "serving.engine.one": "**The same load, one request at a time.** vLLM: {s_tps} tokens/s, TPOT p50 {s_tpot}; "
                          "kvviz's engine: {e_tps} tokens/s, TPOT p50 {e_tpot} ({ratio}). With one request in flight "
                          "there is nothing to batch: the difference is the engines' own speed (vLLM's kernels and "
                          "scheduler against kvviz's plain PyTorch loop); raise the concurrency to see what batching "
                          "adds.",
    # --- the figures (kvviz.ui.serving.figures) ---
    "serving.fig.run_clock": "seconds since the run's start",
    "serving.fig.output_tps": "output tokens/s",
    "serving.fig.no_output": "no output yet",
    "serving.fig.tput.client": "client: output chunks received",
    "serving.fig.tput.client_hover": "%{x:.1f} s: %{y:,.0f} tokens/s received<extra></extra>",
    "serving.fig.tput.server": "server: generation_tokens counter",
    "serving.fig.tput.server_hover": "%{x:.1f} s: %{y:,.0f} tokens/s generated<extra></extra>",
    "serving.fig.tput.title": "Output tokens/s over the run ({bin} s bins)",
    "serving.fig.req.no_samples": "no server samples yet (the server's /metrics is polled during a run)",
    "serving.fig.req.running": "server: running (in the batch)",
    "serving.fig.req.waiting": "server: waiting (queued)",
    "serving.fig.req.in_flight": "client: requests in flight",
    "serving.fig.req.running_hover": "%{x:.2f} s: %{y:.0f} running<extra></extra>",
    "serving.fig.req.waiting_hover": "%{x:.2f} s: %{y:.0f} waiting<extra></extra>",
    "serving.fig.req.in_flight_hover": "%{x:.2f} s: %{y:.0f} in flight<extra></extra>",
    "serving.fig.req.title": "Requests over the run",
    "serving.fig.req.y": "requests",
    "serving.fig.kv.none": "the server reports no KV-cache usage (vLLM's kv_cache_usage_perc, SGLang's token_usage)",
    "serving.fig.kv.used": "server: KV cache used",
    "serving.fig.kv.used_hover": "%{x:.2f} s: %{y:.3g}% used<extra></extra>",
    "serving.fig.kv.predicted": "kvviz: predicted (in-flight lengths in whole blocks)",
    "serving.fig.kv.predicted_hover": "%{x:.2f} s: %{y:.3g}% predicted<extra></extra>",
    "serving.fig.kv.title": "KV-cache usage: measured and predicted",
    "serving.fig.kv.title_unknown": "KV-cache usage (no prediction: model unknown)",
    "serving.fig.kv.y": "KV cache used (% of the server's pool)",
    "serving.fig.phase.accepted": "sent → response accepted (HTTP)",
    "serving.fig.phase.first": "accepted → first token (queue + prefill)",
    "serving.fig.phase.stream": "first token → done (streaming)",
    "serving.fig.phase.hover": "request %{{y}}: {label}, %{{customdata:,.1f}} ms<extra></extra>",
    "serving.fig.tick": "output chunk arrived",
    "serving.fig.tick.hover": "request %{y}: chunk at %{x:.3f} s<extra></extra>",
    "serving.fig.failed": "failed",
    "serving.fig.failed.none": "no first token",
    "serving.fig.failed.hover": "request %{y} failed: %{customdata}<extra></extra>",
    "serving.fig.timeline.none": "no requests yet",
    "serving.fig.timeline.more": " (the first {shown} of {total})",
    "serving.fig.timeline.title": "A request's life: waiting for the first token, then streaming{more}",
    "serving.fig.timeline.y": "request",
    "serving.fig.no_completed": "no completed request yet",
    "serving.fig.itl": "ITL distribution",
    "serving.fig.itl.percentiles": "ITL distribution (p50 {p50}, p99 {p99})",
    "serving.fig.ttft.name": "TTFT of each request",
    "serving.fig.ttft.hover": "request %{customdata}, sent at %{x:.2f} s: TTFT %{y:,.1f} ms<extra></extra>",
    "serving.fig.itl.name": "ITL (gaps between chunks)",
    "serving.fig.itl.hover": "ITL ≈ %{x:,.2f} ms: %{y:,} gaps<extra></extra>",
    "serving.fig.ttft.title": "Time to first token, and the gaps after it",
    "serving.fig.ttft.x": "request sent at (s since the run's start)",
    "serving.fig.ttft.y": "TTFT (ms)",
    "serving.fig.ttft.note": "TTFT per request",
    "serving.fig.itl.x": "ITL (ms, log scale)",
    "serving.fig.itl.y": "gaps",
    "serving.fig.who.client": "client",
    "serving.fig.who.server": "server",
    "serving.fig.row.client": "client (HTTP, what a user waits)",
    "serving.fig.row.server": "server (vLLM's histograms)",
    "serving.fig.mean.accepted": "sent → accepted",
    "serving.fig.mean.first": "accepted → first token",
    "serving.fig.mean.stream": "first token → done",
    "serving.fig.mean.queued": "queued",
    "serving.fig.mean.prefill": "prefill",
    "serving.fig.mean.decode": "decode",
    "serving.fig.stack.name": "{who}: {part} {ms}",
    "serving.fig.stack.hover": "{who}, {part}: %{{x:,.1f}} ms per request<extra></extra>",
    "serving.fig.server_ttft": "server: TTFT mean {ms} (from its HTTP front end)",
    "serving.fig.server_ttft.hover": "server's TTFT mean: %{x:,.1f} ms<extra></extra>",
    "serving.fig.no_histograms": "the server reported no request-time histograms (queue, prefill, decode)",
    "serving.fig.means.title": "Where the mean request's time went: client and server",
    "serving.fig.means.x": "ms per request (mean)",
    "serving.fig.no_sweep": "no sweep yet",
    "serving.fig.levels.x": "requests in flight (log scale)",
    "serving.fig.sweep_tput.name": "output tokens/s (labels: requests/s)",
    "serving.fig.sweep_tput.hover": "%{x} in flight: %{y:,.0f} tokens/s, %{text}<extra></extra>",
    "serving.fig.sweep_tput.title": "Throughput against requests in flight",
    "serving.fig.latency.hover": "%{{x}} in flight: {metric} {q} %{{y:,.1f}} ms<extra></extra>",
    "serving.fig.latency.title": "Latency against requests in flight",
    "serving.fig.latency.log": "ms (log scale)",
    "serving.fig.tradeoff.none": "no sweep level with a TPOT yet (one-token requests have none)",
    "serving.fig.tradeoff.level": "{concurrency} in flight",
    "serving.fig.tradeoff.name": "sweep level",
    "serving.fig.tradeoff.hover": "%{text}: %{x:,.0f} tokens/s in all, %{y:,.0f} tokens/s per user<extra></extra>",
    "serving.fig.tradeoff.title": "The trade-off: each user's speed against total throughput",
    "serving.fig.tradeoff.x": "total output tokens/s",
    "serving.fig.tradeoff.y": "tokens/s per user (1 / TPOT p50)",
    "serving.fig.prefix.without": "no shared prefix",
    "serving.fig.prefix.with": "shared prefix",
    "serving.fig.prefix.ttft": "TTFT p50 (client)",
    "serving.fig.prefix.prefill": "prefill, mean (server)",
    "serving.fig.prefix.hover": "{name}: %{{x}} %{{y:,.1f}} ms<extra></extra>",
    "serving.fig.prefix.rate_without": "without {rate}",
    "serving.fig.prefix.rate_with": "with {rate}",
    "serving.fig.prefix.sep": ", ",
    "serving.fig.prefix.title": "What a shared prefix saves (prefix-cache hits: {said})",
    "serving.fig.prefix.title_none": "What a shared prefix saves (the server reported no prefix-cache hits)",
    "serving.fig.engine.none": "nothing to compare yet",
    "serving.fig.engine.title": "kvviz's engine beside a serving engine",
}
ZH = {
    "serving.intro": """
一个请求在真实服务端上的一生（课程的问题 1）：客户端通过 HTTP 发出请求，
服务端将其排队、对提示词做预填充（prefill），每解码（decode）出一个 token 就流式返回，最后结束这个流。
kvviz 在这里像线上服务那样同时向一个真实引擎发出许多这样的请求，
从客户端测量每个请求（首 token 延迟 TTFT、每个 token 的到达时间、端到端 E2E），
同时读取服务端自己的 Prometheus `/metrics`（运行中与排队的请求、KV Cache 占用、队列、预填充与解码时间）。
**扫描（sweep）** 把并发请求数依次设为 1、2、4……直到吞吐不再增长：
这些曲线展示了连续批处理（continuous batching）在权衡什么（问题 5 和 6）。
可以在这里启动 vLLM（若还没有 vLLM 环境，本页会提供安装），也可以让本页指向一个已有的服务。
""",
    "serving.target": "目标",
    "serving.target.local": "本地 vLLM（由 kvviz 启动）",
    "serving.target.remote": "OpenAI 兼容的服务端点",
    "serving.local_model": "vLLM 加载的模型",
    "serving.kv_space": "KV Cache 空间，每个 rank 的 GiB（vLLM 的 CPU 版本）",
    "serving.tp": "张量并行",
    "serving.pp": "流水线并行",
    "serving.dp": "数据并行",
    "serving.start_vllm": "启动 vLLM",
    "serving.stop_vllm": "停止 vLLM",
    "serving.endpoint_hosted": "服务端点（本演示允许的）",
    "serving.endpoint_url": "服务端点 URL（带不带 /v1 均可）",
    "serving.served": "服务端提供的模型名（见其 /v1/models）",
    "serving.api": "API",
    "serving.api_key": "API key（或设置 KVVIZ_API_KEY）；不会记录或保存",
    "serving.tokenizer": "所服务模型的本地目录（用于统计提示词 token 数、预测 KV 占用；可选）",
    "serving.kind": "运行什么",
    "serving.kind.one": "单次负载",
    "serving.kind.sweep": "并发扫描（sweep）",
    "serving.kind.prefix": "前缀缓存实验",
    "serving.load": "负载",
    "serving.arrivals": "请求到达方式（单次负载）",
    "serving.arrivals.closed": "闭环：固定的并发请求数",
    "serving.arrivals.poisson": "开环：按速率的泊松到达",
    "serving.arrivals.constant": "开环：按速率均匀到达",
    "serving.concurrency": "并发请求数（上限）",
    "serving.rate": "请求速率，请求/s（开环）",
    "serving.prompt_tokens": "提示词 token 数",
    "serving.shared_prefix": "其中所有提示词共享的部分（前缀）",
    "serving.output_tokens": "每个请求的输出 token 数（ignore_eos）",
    "serving.requests": "请求总数（单次负载、实验的每次运行）",
    "serving.duration": "停止发送的时间，s",
    "serving.max_concurrency": "扫描：最后一级",
    "serving.per_level": "扫描：每级每个并发槽位的请求数",
    "serving.slo_ttft": "SLO：TTFT ≤ s",
    "serving.slo_tpot": "SLO：TPOT ≤ s",
    "serving.start": "开始",
    "serving.stop": "停止",
    "serving.engine_box": "同样的负载放到 kvviz 自己的引擎上，一次一个请求",
    "serving.engine_button": "在 kvviz 引擎上重跑上一次负载",
    "serving.json_box": "本次任务的 JSON（不含 API key）",
    "serving.json": "任务",
    "serving.live.level": "，并发 {concurrency}",
    "serving.live.done": "；已完成 {runs} 次运行",
    "serving.live.status": "正在运行{kind}{level}：{seconds} s，已结束 {ended} 个请求，收到 {chunks} 个输出块{done}",
    "serving.final.status": "{kind}完成：{runs} 次运行，{requests} 个请求",
    "serving.final.no_sweep": "运行一次扫描即可画出这些曲线",
    "serving.final.no_prefix": "前缀缓存实验的图显示在这里",
    "serving.final.stopped": "**已停止**：图中只包含停止之前运行的部分。\n\n",
    "serving.refuse.hosted_vllm": "本托管演示为所有访客保持 vLLM 运行，不能停止",
    "serving.refuse.hosted_setup": "本托管演示不安装 vLLM：由其运营者在终端中安装（`python -m kvviz.serving setup`）",
    # --- setting vLLM's environment up from the page (kvviz.serving.setup) ---
    "serving.plots_hint": "*下面的图会在负载运行时逐步画出：先启动 vLLM（或选择一个服务端点），再按 **开始**。*",
    "serving.setup.button": "安装 vLLM（约 3.5 GB，需几分钟）",
    "serving.setup.stop": "停止安装",
    "serving.setup.offer": "`{venv}` **没有 vLLM 环境**。可以在这里安装：vLLM 的 CPU 版及其自带的 torch，"
                           "安装到它自己的虚拟环境中（占用磁盘约 3.5 GB），需几分钟"
                           "（在繁忙的 2 核 CPU 上 5 到 12 分钟）。"
                           "也可以在终端中运行 `python -m kvviz.serving setup`。",
    "serving.setup.hosted_missing": "本演示的主机没有 vLLM 环境（由其运营者安装）：请让本页指向一个服务端点。",
    "serving.setup.running": "**正在安装 vLLM**：{line}。  \n日志：`{log}`。停止会结束 pip 并移除它已创建的内容。",
    "serving.setup.failed": "**安装失败**：{why}。  \n可以再次安装，或在终端中运行 `python -m kvviz.serving setup`。",
    "serving.setup.done": "**{line}**。  \n现在可以启动 vLLM。",
    "serving.setup.stopped": "**{line}**。",
    "serving.refuse.no_run": "在任何一次运行结束前就已停止",
    "serving.refuse.local_first": "请先在服务 {spec} 的本地 vLLM 上跑一次负载："
                                  "对比会把同样的负载放到 kvviz 的引擎上运行",
    "serving.refuse.closed_only": "kvviz 的引擎只接受闭环负载（固定的并发请求数）；请先在 vLLM 上跑一次闭环负载",
    "serving.engine_run": "引擎的运行",
    "serving.source.vllm": "vLLM（连续批处理）",
    "serving.source.engine": "kvviz 引擎（一次一个）",
    "serving.stats.header": "| 完成 | 失败 | 输出 tokens/s | 请求/s | 有效吞吐（goodput，满足 SLO 的请求/s） | 时长 |",
    "serving.stats.row": "| {completed} / {requests} | {failed} | {tokens_per_s} | {requests_per_s} | {goodput}"
                         "（TTFT ≤ {slo_ttft}，TPOT ≤ {slo_tpot}） | {duration} s |",
    "serving.latency.header": "| 延迟 | 均值 | p50 | p90 | p99 |",
    "serving.latency.ttft": "TTFT（首 token 延迟）",
    "serving.latency.tpot": "TPOT（每个输出 token 的时间）",
    "serving.latency.itl": "ITL（输出块之间的间隔）",
    "serving.latency.e2e": "E2E（整个请求）",
    "serving.kv.predicted": "（kvviz 预测 {pct}）",
    "serving.kv.peak": "KV Cache 峰值占用 {pct}{predicted}",
    "serving.server.phases": "每个请求平均排队 {queued}、预填充 {prefill}、解码 {decode}",
    "serving.server.ttft": "服务端 TTFT 均值 {server}，客户端测得 {client}（差值来自 HTTP、分词和流式传输）",
    "serving.server.prefix": "所查找的提示词 token 中前缀缓存命中 {pct}",
    "serving.server.preemptions": "{count} 次抢占（preemption）",
    "serving.server.queue": "最多 {running} 个运行中、{waiting} 个排队",
    "serving.server.sep": "；",
    "serving.server.line": "**服务端视角**（其 /metrics）：{parts}。",
    "serving.run.metrics_error": "无法读取服务端指标：{error}",
    "serving.run.failed": "**{failed} 个请求失败**；第一个：{error}",
    "serving.run.cancelled": "*已取消：进行中的请求记为失败。*",
    "serving.client.line": "**客户端自身的开销**：CPU {cpu} 秒（单核的 {busy}，每个输出 token {per_token} µs）；"
                           "字节到达后读取等待 {wait}（p50/p90），{joined} 的输出块与后面的块在同一次读取中到达"
                           "（其间隔记为 0）；每次发送后 {headers}（p50）收到响应头。时间取自内核的接收时间戳，"
                           "所以这部分开销不计入 TTFT 和 E2E。",
    "serving.client.limited": "**警告：限制本次运行的是客户端而不是服务器**（{why}）：其吞吐低估了服务器。",
    "serving.client.busy": "其事件循环忙碌了运行时间的 {busy}，超过 {limit}",
    "serving.client.late": "其读取在 p90 等待了 {wait}，超过请求耗时 {e2e} 的 {share}",
    "serving.client.sep": "；",
    "serving.rate.line": "**开环**：请求速率 {asked} 个/秒，实际发送 {sent}，完成 {completed}。{cap}",
    "serving.rate.free": "并发上限 {cap}（按这些请求的耗时最多承载 {carried} 个请求/秒）从未挡住任何到达的请求。",
    "serving.rate.held": "并发上限 {cap} 在突发时挡住了 {requests} 个到达中的 {held} 个（平均等待 {wait}）；"
                         "它最多承载 {carried} 个请求/秒，高于请求速率。",
    "serving.rate.bound": "**并发上限 {cap} 限制了速率**：它挡住了 {requests} 个到达中的 {held} 个（平均等待 "
                          "{wait}），按这些请求的耗时最多承载 {carried} 个请求/秒（利特尔法则：上限 / 平均 E2E），"
                          "低于请求速率。",
    "serving.q5.from_nothing": "从零开始",
    "serving.q5.users": "（每个用户的解码速度从 {first} 变为 {top} tokens/s）",
    "serving.q5.text": "**Q5：{question}** TTFT 是用户等到第一个 token 的时间（排队 + 预填充）；TPOT 是其余 token "
                       "流向该用户的速度（一次解码步）；吞吐是服务端为所有用户合计产出的量。并发从 {first} 增加到 "
                       "{top} 时，总输出吞吐从 {first_tps} 变为 {top_tps} tokens/s（{gain}），而每个用户的 TPOT p50 "
                       "从 {first_tpot} 变为 {top_tpot}{users}，TTFT p50 从 {first_ttft} 变为 {top_ttft}。{reading}",
    "serving.q5.batching": "批处理让更多请求共用每一次权重读取，所以服务端每一步能产出更多 token。",
    "serving.q5.batching_slower": "批处理让更多请求共用每一次权重读取，服务端每一步产出更多 token，但每一步（也就是"
                                  "每个用户的下一个 token）耗时更长（TPOT 变为原来的 {ratio}×）："
                                  "吞吐是用每个用户的速度换来的。",
    "serving.q5.batching_free": "批处理让更多请求共用每一次权重读取，服务端每一步产出更多 token；而这里每个用户的 "
                                "TPOT 并没有随之增长：每一步仍受固定开销（调度、读取权重）限制，而不是受批大小限制，"
                                "所以批处理几乎是免费的。越过这一点后，每一步的计算量随批大小增长，TPOT 就会上升。",
    "serving.saturation.growing": "扫描到最后一级（并发 {last}，{tokens_per_s} tokens/s）时吞吐仍在增长："
                                  "服务端尚未饱和。",
    "serving.saturation.stopped": "吞吐在并发约 {level} 时停止增长（{tokens_per_s} tokens/s）：最好的一级（并发 "
                                  "{best}）产出 {best_tps} tokens/s，只多了 {more}，而 TTFT p50 从 {ttft} 变为 "
                                  "{best_ttft}。饱和之后，增加并发只会让请求等得更久。",
    "serving.q6.text": "**Q6：{question}** 先查排队、预填充和调度：这些时间计入 TTFT，不计入 TPOT。本次 TTFT p50 "
                       "从并发 {first} 时的 {first_ttft} 增长到并发 {last} 时的 {last_ttft}（p99 {last_p99}），"
                       "TPOT p50 从 {first_tpot} 变为 {last_tpot}。",
    "serving.q6.no_metrics": "未读取到服务端指标，因此这里看不到它的队列。",
    "serving.q6.level": "并发 {concurrency}（最多 {waiting} 个）",
    "serving.q6.sep": "、",
    "serving.q6.queued": "服务端在这些并发下有请求排队：{levels}；它们在预填充之前先排队等待。",
    "serving.q6.no_queue": "服务端从未有请求排队，所以增长并非来自队列：新请求的预填充与其他请求的解码"
                           "共享调度器的每一步。",
    "serving.q6.top": "并发 {concurrency} 时，服务端平均每个请求排队 {queued}、预填充用时 {prefill}；长提示词会拉长"
                      "预填充，调度器的批限制（max-num-seqs、每步的 token 预算）会拉长队列。",
    "serving.sweep.client": "**扫描在并发 {concurrency} 处停止，因为客户端在这一级已饱和**（瓶颈是它的事件循环）："
                            "更高的级别测到的将是客户端。这一级的吞吐只是服务器吞吐的下限。",
    "serving.sweep.none": "还没有扫描结果。",
    "serving.sweep.one": "只有一级（并发 {concurrency}）：问题 5 和 6 的权衡至少要两级才能看出。",
    "serving.change.plain": "从 {before} 变为 {after}",
    "serving.change.delta": "从 {before} 变为 {after}（{delta} ms{relative}）",
    "serving.change.relative": "，{relative}",
    "serving.prefix.no_hits": "服务端没有报告前缀缓存命中。",
    "serving.prefix.hits": "有共享前缀时，服务端查找的提示词 token 中有 {with_} 已在前缀缓存中"
                           "（没有共享前缀时：{without}）。",
    "serving.prefix.prefill": "服务端的平均预填充时间{change}。",
    "serving.prefix.text": "{hits}TTFT p50 {ttft}。{prefill}在缓存中找到的 token 无需预填充："
                           "它们的 key 和 value 已经存好了。",
    "serving.engine.many": "**同样的负载：并发 {concurrency}，{requests} 个请求，每个 {tokens} 个 token。** vLLM"
                           "（连续批处理）：{s_tps} tokens/s，TTFT p50 {s_ttft}，TPOT p50 {s_tpot}。kvviz 引擎（一次"
                           "一个请求）：{e_tps} tokens/s，TTFT p50 {e_ttft}，TPOT p50 {e_tpot}。批处理让每秒 token "
                           "数达到原来的 {ratio}：vLLM 的每一步同时解码所有运行中的请求，一次权重读取供它们共用；"
                           "而 kvviz 的引擎依次运行各个请求，所以它的 TPOT 只是单个请求的，TTFT 还包括等待前面 "
                           "{ahead} 个请求完成的时间。",
    "serving.engine.one": "**同样的负载，一次一个请求。** vLLM：{s_tps} tokens/s，TPOT p50 {s_tpot}；kvviz 引擎："
                          "{e_tps} tokens/s，TPOT p50 {e_tpot}（{ratio}）。只有一个请求在进行时没有什么可批处理的："
                          "差别来自引擎本身的速度（vLLM 的算子和调度器对比 kvviz 朴素的 PyTorch 循环）；提高并发即可"
                          "看到批处理带来了什么。",
    "serving.fig.run_clock": "自运行开始的秒数",
    "serving.fig.output_tps": "输出 tokens/s",
    "serving.fig.no_output": "还没有输出",
    "serving.fig.tput.client": "客户端：收到的输出块",
    "serving.fig.tput.client_hover": "%{x:.1f} s：收到 %{y:,.0f} tokens/s<extra></extra>",
    "serving.fig.tput.server": "服务端：generation_tokens 计数器",
    "serving.fig.tput.server_hover": "%{x:.1f} s：生成 %{y:,.0f} tokens/s<extra></extra>",
    "serving.fig.tput.title": "运行期间的输出 tokens/s（每 {bin} s 一格）",
    "serving.fig.req.no_samples": "还没有服务端采样（运行期间会轮询服务端的 /metrics）",
    "serving.fig.req.running": "服务端：运行中（在批中）",
    "serving.fig.req.waiting": "服务端：等待中（排队）",
    "serving.fig.req.in_flight": "客户端：进行中的请求",
    "serving.fig.req.running_hover": "%{x:.2f} s：%{y:.0f} 个运行中<extra></extra>",
    "serving.fig.req.waiting_hover": "%{x:.2f} s：%{y:.0f} 个排队<extra></extra>",
    "serving.fig.req.in_flight_hover": "%{x:.2f} s：%{y:.0f} 个进行中<extra></extra>",
    "serving.fig.req.title": "运行期间的请求数",
    "serving.fig.req.y": "请求数",
    "serving.fig.kv.none": "服务端没有报告 KV Cache 占用（vLLM 的 kv_cache_usage_perc、SGLang 的 token_usage）",
    "serving.fig.kv.used": "服务端：已用 KV Cache",
    "serving.fig.kv.used_hover": "%{x:.2f} s：已用 %{y:.3g}%<extra></extra>",
    "serving.fig.kv.predicted": "kvviz：预测值（进行中请求的长度，按整块计）",
    "serving.fig.kv.predicted_hover": "%{x:.2f} s：预测 %{y:.3g}%<extra></extra>",
    "serving.fig.kv.title": "KV Cache 占用：实测与预测",
    "serving.fig.kv.title_unknown": "KV Cache 占用（无预测：模型未知）",
    "serving.fig.kv.y": "已用 KV Cache（占服务端缓存池的 %）",
    "serving.fig.phase.accepted": "发送 → 响应被接受（HTTP）",
    "serving.fig.phase.first": "接受 → 首 token（排队 + 预填充）",
    "serving.fig.phase.stream": "首 token → 完成（流式输出）",
    "serving.fig.phase.hover": "请求 %{{y}}：{label}，%{{customdata:,.1f}} ms<extra></extra>",
    "serving.fig.tick": "输出块到达",
    "serving.fig.tick.hover": "请求 %{y}：输出块到达于 %{x:.3f} s<extra></extra>",
    "serving.fig.failed": "失败",
    "serving.fig.failed.none": "没有首 token",
    "serving.fig.failed.hover": "请求 %{y} 失败：%{customdata}<extra></extra>",
    "serving.fig.timeline.none": "还没有请求",
    "serving.fig.timeline.more": "（共 {total} 个中的前 {shown} 个）",
    "serving.fig.timeline.title": "请求的一生：先等待首 token，再流式输出{more}",
    "serving.fig.timeline.y": "请求",
    "serving.fig.no_completed": "还没有完成的请求",
    "serving.fig.itl": "ITL 分布",
    "serving.fig.itl.percentiles": "ITL 分布（p50 {p50}，p99 {p99}）",
    "serving.fig.ttft.name": "每个请求的 TTFT",
    "serving.fig.ttft.hover": "请求 %{customdata}，发送于 %{x:.2f} s：TTFT %{y:,.1f} ms<extra></extra>",
    "serving.fig.itl.name": "ITL（输出块之间的间隔）",
    "serving.fig.itl.hover": "ITL ≈ %{x:,.2f} ms：%{y:,} 个间隔<extra></extra>",
    "serving.fig.ttft.title": "首 token 延迟（TTFT），以及之后的间隔",
    "serving.fig.ttft.x": "请求发送时刻（自运行开始的秒数）",
    "serving.fig.ttft.y": "TTFT (ms)",
    "serving.fig.ttft.note": "每个请求的 TTFT",
    "serving.fig.itl.x": "ITL（ms，对数坐标）",
    "serving.fig.itl.y": "间隔数",
    "serving.fig.who.client": "客户端",
    "serving.fig.who.server": "服务端",
    "serving.fig.row.client": "客户端（HTTP，用户实际等待的时间）",
    "serving.fig.row.server": "服务端（vLLM 的直方图）",
    "serving.fig.mean.accepted": "发送 → 接受",
    "serving.fig.mean.first": "接受 → 首 token",
    "serving.fig.mean.stream": "首 token → 完成",
    "serving.fig.mean.queued": "排队",
    "serving.fig.mean.prefill": "预填充",
    "serving.fig.mean.decode": "解码",
    "serving.fig.stack.name": "{who}：{part} {ms}",
    "serving.fig.stack.hover": "{who}，{part}：每个请求 %{{x:,.1f}} ms<extra></extra>",
    "serving.fig.server_ttft": "服务端：TTFT 均值 {ms}（在其 HTTP 前端测得）",
    "serving.fig.server_ttft.hover": "服务端 TTFT 均值：%{x:,.1f} ms<extra></extra>",
    "serving.fig.no_histograms": "服务端没有报告请求时间直方图（排队、预填充、解码）",
    "serving.fig.means.title": "平均每个请求的时间花在哪里：客户端与服务端",
    "serving.fig.means.x": "每个请求的 ms（均值）",
    "serving.fig.no_sweep": "还没有扫描结果",
    "serving.fig.levels.x": "并发请求数（对数坐标）",
    "serving.fig.sweep_tput.name": "输出 tokens/s（标注：请求/s）",
    "serving.fig.sweep_tput.hover": "并发 %{x}：%{y:,.0f} tokens/s，%{text}<extra></extra>",
    "serving.fig.sweep_tput.title": "吞吐随并发请求数的变化",
    "serving.fig.latency.hover": "并发 %{{x}}：{metric} {q} %{{y:,.1f}} ms<extra></extra>",
    "serving.fig.latency.title": "延迟随并发请求数的变化",
    "serving.fig.latency.log": "ms（对数坐标）",
    "serving.fig.tradeoff.none": "还没有带 TPOT 的扫描级（只输出一个 token 的请求没有 TPOT）",
    "serving.fig.tradeoff.level": "并发 {concurrency}",
    "serving.fig.tradeoff.name": "扫描级",
    "serving.fig.tradeoff.hover": "%{text}：合计 %{x:,.0f} tokens/s，每用户 %{y:,.0f} tokens/s<extra></extra>",
    "serving.fig.tradeoff.title": "权衡：每个用户的速度与总吞吐",
    "serving.fig.tradeoff.x": "总输出 tokens/s",
    "serving.fig.tradeoff.y": "每用户 tokens/s（1 / TPOT p50）",
    "serving.fig.prefix.without": "无共享前缀",
    "serving.fig.prefix.with": "有共享前缀",
    "serving.fig.prefix.ttft": "TTFT p50（客户端）",
    "serving.fig.prefix.prefill": "预填充均值（服务端）",
    "serving.fig.prefix.hover": "{name}：%{{x}} %{{y:,.1f}} ms<extra></extra>",
    "serving.fig.prefix.rate_without": "无共享前缀 {rate}",
    "serving.fig.prefix.rate_with": "有共享前缀 {rate}",
    "serving.fig.prefix.sep": "，",
    "serving.fig.prefix.title": "共享前缀省下了什么（前缀缓存命中：{said}）",
    "serving.fig.prefix.title_none": "共享前缀省下了什么（服务端没有报告前缀缓存命中）",
    "serving.fig.engine.none": "还没有可比较的内容",
    "serving.fig.engine.title": "kvviz 引擎与推理服务引擎对比",
}
register(EN, ZH)
