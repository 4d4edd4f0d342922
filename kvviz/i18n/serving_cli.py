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
    "serving_cli.multinode.starting": "starting {nodes} nodes of {layout} on this host's loopback (a minute or "
                                      "more before vLLM is ready)...",
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
    "serving_cli.multinode": "{layout} over {nodes} nodes, {per_node} worker(s) a node: {mode}",
    "serving_cli.multinode.mp.dp": "whole replicas on each node, one API on the head (vLLM's data parallel "
                                   "deployment, internal load balancing)",
    "serving_cli.multinode.mp.span": "each replica over whole nodes, vLLM's own processes across them "
                                     "(--nnodes, --node-rank)",
    "serving_cli.multinode.ray.dp": "a Ray cluster; whole replicas on each node, placed by Ray",
    "serving_cli.multinode.ray.span": "a Ray cluster; each replica over whole nodes, placed by Ray",
    "serving_cli.multinode.api": "node {node} (head: the API and its engines):",
    "serving_cli.multinode.headless": "node {node} (headless: engines or workers, no API):",
    "serving_cli.multinode.ray-head": "node {node} (Ray's head):",
    "serving_cli.multinode.ray-worker": "node {node} (joins Ray):",
    "serving_cli.multinode.rehearsed": "rehearsed on this host: the head answered in {s:.0f} s, a completion "
                                       "{text!r}; engines logged {engines}; {pids} processes ran, {left} left "
                                       "after the stop",
    "serving_cli.pserve.intro": "On {cpus} CPU cores (load average {load_lo:.1f}-{load_hi:.1f} over the "
                                "runs), tp1 (one worker; load average {base_load:.1f} over its runs) decoded at "
                                "{tpot:.1f} ms a token (TPOT p50) "
                                "with {low} request(s) in flight and made {tps:,.0f} output tokens/s with {high}, "
                                "vLLM's processes spending {cpu:.1f} ms of CPU a token.",
    "serving_cli.pserve.tp": "{layout} (load average {load:.1f}) splits each layer's matrix products across {ranks} "
                             "worker processes and "
                             "all-reduces every layer's output between them (gloo, shared memory): with {low} in "
                             "flight its TPOT was {tpot:.1f} ms, {tpot_ratio:.2f}× tp1's ({tpot_word}), its TTFT "
                             "{ttft:.1f} ms against {base_ttft:.1f}; with {high} it made {tps:,.0f} tokens/s, "
                             "{tps_ratio:.2f}× tp1's, spending {cpu:.1f} ms of CPU a token; each rank logged "
                             "{tokens:,} tokens of KV (its share of each).",
    "serving_cli.pserve.pp": "{layout} (load average {load:.1f}) runs the layers as {ranks} stages, a process each, "
                             "the activations sent from "
                             "stage to stage every step: with {low} in flight its TPOT was {tpot:.1f} ms, "
                             "{tpot_ratio:.2f}× tp1's ({tpot_word}), its TTFT {ttft:.1f} ms against "
                             "{base_ttft:.1f}; with {high} it made {tps:,.0f} tokens/s, {tps_ratio:.2f}× tp1's, "
                             "spending {cpu:.1f} ms of CPU a token; each stage logged {tokens:,} tokens of KV (its "
                             "layers' share of each).",
    "serving_cli.pserve.dp": "{layout} (load average {load:.1f}) runs {ranks} whole engines (replicas) on the same "
                             "{cpus} cores, the requests "
                             "dealt between them: with {low} in flight its TPOT was {tpot:.1f} ms, {tpot_ratio:.2f}× "
                             "tp1's ({tpot_word}), its TTFT {ttft:.1f} ms against {base_ttft:.1f}; with {high} it "
                             "made {tps:,.0f} tokens/s, {tps_ratio:.2f}× tp1's, spending {cpu:.1f} ms of CPU a "
                             "token; each engine holds its own cache of {tokens:,} tokens.",
    "serving_cli.pserve.busy": "The load average went past {cpus}: other jobs held cores too, and every figure here "
                               "carries that contention.",
    "serving_cli.pserve.slower": "slower",
    "serving_cli.pserve.faster": "faster",
    "serving_cli.pserve.verdict": "Lowest TPOT with {low} in flight: {best_low}; most tokens/s with {high}: "
                                  "{best_high}.",
    "serving_cli.pserve.none_paid": "On these cores no split paid for its communication: what grew was the KV each "
                                    "rank can hold, not the speed.",
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
    "serving_cli.multinode.starting": "正在本机回环地址上启动 {layout} 的 {nodes} 个节点"
                                      "（vLLM 要一分钟或更久才就绪）...",
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
    "serving_cli.multinode": "{layout} 分布在 {nodes} 个节点上，每节点 {per_node} 个 worker：{mode}",
    "serving_cli.multinode.mp.dp": "每个节点放整数个副本，API 只在主节点上（vLLM 的数据并行部署，内部负载均衡）",
    "serving_cli.multinode.mp.span": "每个副本占满整数个节点，由 vLLM 自己的进程跨节点运行（--nnodes、--node-rank）",
    "serving_cli.multinode.ray.dp": "Ray 集群；每个节点放整数个副本，由 Ray 放置",
    "serving_cli.multinode.ray.span": "Ray 集群；每个副本占满整数个节点，由 Ray 放置",
    "serving_cli.multinode.api": "节点 {node}（主节点：API 及其引擎）：",
    "serving_cli.multinode.headless": "节点 {node}（无头节点：只有引擎或 worker，没有 API）：",
    "serving_cli.multinode.ray-head": "节点 {node}（Ray 主节点）：",
    "serving_cli.multinode.ray-worker": "节点 {node}（加入 Ray）：",
    "serving_cli.multinode.rehearsed": "已在本机演练：主节点 {s:.0f} 秒后应答，补全结果 {text!r}；"
                                       "引擎日志中的 KV Cache {engines}；运行过 {pids} 个进程，停止后剩下 {left} 个",
    "serving_cli.pserve.intro": "在 {cpus} 个 CPU 核上（各次运行期间负载均值 "
                                "{load_lo:.1f}-{load_hi:.1f}），tp1（一个 worker；其运行期间负载均值 "
                                "{base_load:.1f}）在 {low} 个请求并发时每 "
                                "token 解码 "
                                "{tpot:.1f} ms（TPOT p50），{high} 个并发时输出 {tps:,.0f} tokens/s，"
                                "vLLM 各进程每 token 花费 {cpu:.1f} ms CPU。",
    "serving_cli.pserve.tp": "{layout}（负载均值 {load:.1f}）把每层的矩阵乘法拆到 {ranks} 个 worker 进程上，"
                             "每层输出在它们之间做一次 "
                             "all-reduce（gloo、共享内存）：{low} 个并发时 TPOT 为 {tpot:.1f} ms，是 tp1 的 "
                             "{tpot_ratio:.2f} 倍（{tpot_word}），TTFT {ttft:.1f} ms（tp1 为 {base_ttft:.1f}）；"
                             "{high} 个并发时输出 {tps:,.0f} tokens/s，是 tp1 的 {tps_ratio:.2f} 倍，"
                             "每 token 花费 {cpu:.1f} ms CPU；每个 rank 日志中的 KV Cache 为 {tokens:,} 个 token"
                             "（每个 token 存它的那一份）。",
    "serving_cli.pserve.pp": "{layout}（负载均值 {load:.1f}）把各层分成 {ranks} 个流水线阶段，每阶段一个进程，"
                             "每一步把激活从一个阶段发到下一个："
                             "{low} 个并发时 TPOT 为 {tpot:.1f} ms，是 tp1 的 {tpot_ratio:.2f} 倍（{tpot_word}），"
                             "TTFT {ttft:.1f} ms（tp1 为 {base_ttft:.1f}）；{high} 个并发时输出 {tps:,.0f} tokens/s，"
                             "是 tp1 的 {tps_ratio:.2f} 倍，每 token 花费 {cpu:.1f} ms CPU；每个阶段日志中的 KV Cache "
                             "为 {tokens:,} 个 token（每个 token 存它那几层的一份）。",
    "serving_cli.pserve.dp": "{layout}（负载均值 {load:.1f}）在同样的 {cpus} 个核上运行 {ranks} 个完整引擎（副本），"
                             "请求在它们之间分配："
                             "{low} 个并发时 TPOT 为 {tpot:.1f} ms，是 tp1 的 {tpot_ratio:.2f} 倍（{tpot_word}），"
                             "TTFT {ttft:.1f} ms（tp1 为 {base_ttft:.1f}）；{high} 个并发时输出 {tps:,.0f} tokens/s，"
                             "是 tp1 的 {tps_ratio:.2f} 倍，每 token 花费 {cpu:.1f} ms CPU；每个引擎有自己的 "
                             "{tokens:,} 个 token 的 KV Cache。",
    "serving_cli.pserve.busy": "负载均值超过了 {cpus}：其他任务也占着核，这里的每个数字都带着这种争用。",
    "serving_cli.pserve.slower": "更慢",
    "serving_cli.pserve.faster": "更快",
    "serving_cli.pserve.verdict": "{low} 个并发时 TPOT 最低的是 {best_low}；{high} 个并发时吞吐最高的是 {best_high}。",
    "serving_cli.pserve.none_paid": "在这些核上，没有哪种切分抵得上它的通信开销：增加的是每个 rank 能存的 KV Cache，"
                                    "而不是速度。",
}
register(EN, ZH)
