"""The serving command line's texts (python -m kvviz.serving ...): its progress, notes, errors and the one-line
results of a run, a sweep's levels and a capacity check. The Serving tab's prose is kvviz/i18n/serving.py's; the
errors kvviz's core and the server raise are translated by template (kvviz/i18n/errors.py). JSON output stays
English: its keys are what a script reads. The English texts are the lines the CLI has always printed, column
for column (tests/serving/test_cli.py pins them)."""

from __future__ import annotations

from kvviz.i18n import register

EN = {
    "serving_cli.error": "error: {message}",
    "serving_cli.key_error": "error: {message} (set KVVIZ_API_KEY or pass --api-key)",
    "serving_cli.interrupted": "interrupted",
    "serving_cli.note": "note: {note}",
    "serving_cli.estimated": "note: no tokenizer, so prompts of about {tokens} tokens (one a word, estimated); "
                             "--tokenizer DIR counts them",
    "serving_cli.vllm.starting": "starting vLLM for {name} on {url} (about a minute on a small CPU)...",
    "serving_cli.vllm.ready": "vLLM ready in {seconds:.0f} s; KV capacity {tokens:,} tokens",
    "serving_cli.setup.done": "vLLM's environment is ready in {venv} ({seconds:.0f} s)",
    "serving_cli.start.starting": "starting vLLM for {name} (log: {log})...",
    "serving_cli.start.serving": "vLLM serves {name} at {url} (ready in {seconds:.0f} s; KV capacity {tokens:,} "
                                 "tokens; dtype {dtype}). Ctrl-C stops it.",
    "serving_cli.start.ranks": "KV cache tokens per rank as vLLM logged them: {ranks}",
    "serving_cli.parallel": "{model:<22} {layout:<12} KV heads/rank {heads:<5} layers/stage {stages:<6} "
                            "{bytes_per_token:>6,} B/token/rank  kvviz slots/rank {slots:>10,}  "
                            "modelled: blocks {blocks:>7} logged {logged:>10}",
    "serving_cli.parallel.not_modelled": "  not modelled: {why}",
    "serving_cli.parallel.vllm": "  vLLM: blocks {blocks:>7,} logged {logged:>10}  ranks {ranks}  {verdict}",
    "serving_cli.start.stopping": "stopping vLLM...",
    "serving_cli.result": "c={concurrency:<4} {completed}/{requests} ok  {tokens_per_s:8,.1f} tok/s  "
                          "{requests_per_s:6.2f} req/s  TTFT p50/p99 {ttft_p50}/{ttft_p99} ms  "
                          "TPOT p50/p99 {tpot_p50}/{tpot_p99} ms  ITL p50 {itl_p50} ms  "
                          "goodput {goodput:.2f} req/s",
    "serving_cli.result.running": "  server running<={peak:.0f}",
    "serving_cli.server": "      server, per request: queued {queued} ms, prefill {prefill} ms, decode {decode} ms; "
                          "TTFT mean {ttft} ms (client: {client} ms)  prefix-cache hits {hits}  "
                          "preemptions {preemptions:.0f}{kv}",
    "serving_cli.server.kv": "  KV used <= {used:.2%}",
    "serving_cli.server.predicted": " (kvviz predicted {predicted:.2%})",
    "serving_cli.capacity": "{model:<22} {attention:<32} {dtype}/{vllm_dtype} {bytes_per_token:>7,} B/token  "
                            "block {block}  pool: vLLM {vllm_pool:>10,} modelled {modelled_pool:>10,}  "
                            "logged: vLLM {vllm_logged:>10} modelled {kvviz_logged:>10,}  "
                            "kvviz slots {slots:>10,}  {verdict}",
    "serving_cli.capacity.agree": "agree",
    "serving_cli.capacity.differ": "DIFFER",
    "serving_cli.capacity.not_modelled": "{model:<22} {attention:<32} {dtype}/{vllm_dtype} {bytes_per_token:>7,} "
                                         "B/token  block {block}  pool: vLLM {vllm_pool:>10,}  "
                                         "logged: vLLM {vllm_logged:>10}  kvviz slots {slots:>10,}  "
                                         "not modelled: {why}",
    "serving_cli.capacity.groups": "      vLLM's KV-cache groups (modelled): {groups}, {layers} layer(s) a group; "
                                   "blocks: vLLM {vllm_blocks:,} modelled {blocks:,}; a request of {length:,} "
                                   "tokens holds {per_request} blocks",
    "serving_cli.capacity.kind.full": "{n} full",
    "serving_cli.capacity.kind.sliding": "{n} sliding (window {window})",
    "serving_cli.capacity.kind.chunked": "{n} chunked (chunk {window})",
    "serving_cli.capacity.padding": " with {padding} padding layer(s)",
    "serving_cli.client": "      client: CPU {cpu:.2f} s ({busy:.0%} of a core, {per_token:,.1f} µs/token)  "
                          "reads waited p50/p90 {wait} ms  chunks read together {joined:.0%}  headers p50 {headers} ms",
    "serving_cli.client.limited": "      warning: the client, not the server, limited this run ({why}); its figures "
                                  "understate the server",
    "serving_cli.client.busy": "its loop was busy {busy:.0%} of the run, over {limit:.0%}",
    "serving_cli.client.late": "its reads waited {wait} ms at p90, over {share:.1%} of a request's {e2e} ms",
    "serving_cli.client.sep": "; ",
    "serving_cli.rate": "      open loop: asked {asked:.2f} req/s, sent {sent}, completed {completed:.2f}; {cap}",
    "serving_cli.rate.free": "the cap of {cap} in flight (it carries at most {carried} req/s at these requests' "
                             "duration) never held an arrival back",
    "serving_cli.rate.held": "the cap of {cap} in flight held back {held} of {requests} arrivals in bursts (mean "
                             "wait {wait} ms); it carries at most {carried} req/s, more than the rate asked",
    "serving_cli.rate.bound": "the cap of {cap} in flight held back {held} of {requests} arrivals (mean wait {wait} "
                              "ms) and BOUNDED THE RATE: it carries at most {carried} req/s at these requests' "
                              "duration, less than the rate asked",
    "serving_cli.sweep.saturated": "sweep stopped at c={concurrency}: throughput stopped growing (the server is "
                                   "saturated)",
    "serving_cli.sweep.client": "sweep stopped at c={concurrency}: the client saturated there (its event loop was "
                                "the bottleneck); levels beyond it would measure the client",
    "serving_cli.sweep.cancelled": "sweep stopped at c={concurrency}: cancelled",
    "serving_cli.sweep.last": "sweep ended at its last level, c={concurrency}",
}
ZH = {
    "serving_cli.error": "错误：{message}",
    "serving_cli.key_error": "错误：{message}（请设置 KVVIZ_API_KEY 或传入 --api-key）",
    "serving_cli.interrupted": "已中断",
    "serving_cli.note": "注意：{note}",
    "serving_cli.estimated": "注意：没有分词器，提示词约 {tokens} 个 token（按一个词一个 token 估算）；"
                             "用 --tokenizer DIR 可准确计数",
    "serving_cli.vllm.starting": "正在为 {name} 启动 vLLM，地址 {url}（小型 CPU 上约需一分钟）...",
    "serving_cli.vllm.ready": "vLLM 已就绪，用时 {seconds:.0f} 秒；KV Cache 容量 {tokens:,} 个 token",
    "serving_cli.setup.done": "vLLM 环境已就绪：{venv}（用时 {seconds:.0f} 秒）",
    "serving_cli.start.starting": "正在为 {name} 启动 vLLM（日志：{log}）...",
    "serving_cli.start.serving": "vLLM 正在 {url} 提供 {name}（就绪用时 {seconds:.0f} 秒；KV Cache 容量 {tokens:,} "
                                 "个 token；dtype {dtype}）。按 Ctrl-C 停止。",
    "serving_cli.start.ranks": "vLLM 日志中每个 rank 的 KV Cache token 数：{ranks}",
    "serving_cli.parallel": "{model:<22} {layout:<12} 每 rank KV 头 {heads:<5} 每级层数 {stages:<6} "
                            "{bytes_per_token:>6,} B/token/rank  kvviz 每 rank 槽位 {slots:>10,}  "
                            "模型计算：块数 {blocks:>7} 日志 {logged:>10}",
    "serving_cli.parallel.not_modelled": "  未建模：{why}",
    "serving_cli.parallel.vllm": "  vLLM：块数 {blocks:>7,} 日志 {logged:>10}  rank {ranks}  {verdict}",
    "serving_cli.start.stopping": "正在停止 vLLM...",
    "serving_cli.result": "c={concurrency:<4} {completed}/{requests} 成功  {tokens_per_s:8,.1f} tok/s  "
                          "{requests_per_s:6.2f} req/s  TTFT p50/p99 {ttft_p50}/{ttft_p99} ms  "
                          "TPOT p50/p99 {tpot_p50}/{tpot_p99} ms  ITL p50 {itl_p50} ms  "
                          "有效吞吐（goodput）{goodput:.2f} req/s",
    "serving_cli.result.running": "  服务器运行中<={peak:.0f}",
    "serving_cli.server": "      服务器端，每个请求：排队 {queued} ms，预填充 {prefill} ms，解码 {decode} ms；"
                          "TTFT 均值 {ttft} ms（客户端：{client} ms）  前缀缓存命中 {hits}  "
                          "抢占 {preemptions:.0f} 次{kv}",
    "serving_cli.server.kv": "  KV Cache 使用 <= {used:.2%}",
    "serving_cli.server.predicted": "（kvviz 预测 {predicted:.2%}）",
    "serving_cli.capacity": "{model:<22} {attention:<32} {dtype}/{vllm_dtype} {bytes_per_token:>7,} B/token  "
                            "块大小 {block}  池：vLLM {vllm_pool:>10,} 模型计算 {modelled_pool:>10,}  "
                            "日志：vLLM {vllm_logged:>10} 模型计算 {kvviz_logged:>10,}  "
                            "kvviz 槽位 {slots:>10,}  {verdict}",
    "serving_cli.capacity.agree": "一致",
    "serving_cli.capacity.differ": "不一致",
    "serving_cli.capacity.not_modelled": "{model:<22} {attention:<32} {dtype}/{vllm_dtype} {bytes_per_token:>7,} "
                                         "B/token  块大小 {block}  池：vLLM {vllm_pool:>10,}  "
                                         "日志：vLLM {vllm_logged:>10}  kvviz 槽位 {slots:>10,}  "
                                         "未建模：{why}",
    "serving_cli.capacity.groups": "      vLLM 的 KV Cache 分组（模型计算）：{groups}，每组 {layers} 层；"
                                   "块数：vLLM {vllm_blocks:,}，模型计算 {blocks:,}；一个 {length:,} token 的请求"
                                   "占 {per_request} 块",
    "serving_cli.capacity.kind.full": "{n} 组全注意力",
    "serving_cli.capacity.kind.sliding": "{n} 组滑动窗口（窗口 {window}）",
    "serving_cli.capacity.kind.chunked": "{n} 组分块局部注意力（块长 {window}）",
    "serving_cli.capacity.padding": "，含 {padding} 个填充层",
    "serving_cli.client": "      客户端：CPU {cpu:.2f} 秒（单核的 {busy:.0%}，每 token {per_token:,.1f} µs）  读取等待 "
                          "p50/p90 {wait} ms  一起读到的输出块 {joined:.0%}  响应头 p50 {headers} ms",
    "serving_cli.client.limited": "      警告：限制本次运行的是客户端而不是服务器（{why}）；其数据低估了服务器",
    "serving_cli.client.busy": "其事件循环忙碌了运行时间的 {busy:.0%}，超过 {limit:.0%}",
    "serving_cli.client.late": "其读取在 p90 等待了 {wait} ms，超过请求耗时 {e2e} ms 的 {share:.1%}",
    "serving_cli.client.sep": "；",
    "serving_cli.rate": "      开环：请求速率 {asked:.2f} req/s，实际发送 {sent}，完成 {completed:.2f}；{cap}",
    "serving_cli.rate.free": "并发上限 {cap}（按这些请求的耗时最多承载 {carried} req/s）从未挡住任何到达的请求",
    "serving_cli.rate.held": "并发上限 {cap} 在突发时挡住了 {requests} 个到达中的 {held} 个（平均等待 {wait} ms）；"
                             "它最多承载 {carried} req/s，高于请求速率",
    "serving_cli.rate.bound": "并发上限 {cap} 挡住了 {requests} 个到达中的 {held} 个（平均等待 {wait} ms），"
                              "并限制了速率：按这些请求的耗时它最多承载 {carried} req/s，低于请求速率",
    "serving_cli.sweep.saturated": "扫描在 c={concurrency} 停止：吞吐不再增长（服务器已饱和）",
    "serving_cli.sweep.client": "扫描在 c={concurrency} 停止：客户端在这一级已饱和（瓶颈是它的事件循环）；"
                                "更高的级别测到的将是客户端",
    "serving_cli.sweep.cancelled": "扫描在 c={concurrency} 停止：已取消",
    "serving_cli.sweep.last": "扫描在最后一级 c={concurrency} 结束",
}
register(EN, ZH)
