"""The texts of the live-generation, request-lifecycle and history tabs: their controls, a run's metrics and the
figures of one run (per-token latency, KV growth, the life cycle, TTFT by cause), the history's columns."""

from __future__ import annotations

from kvviz.i18n import register

EN = {
    # The live-generation tab.
    "generation.intro": """
A request's life: it arrives, waits for the device, is tokenized, then **prefill** reads the whole
prompt in one forward pass (many tokens at once: bound by compute) and samples the first token. Then
**decode** feeds one token at a time, reading every weight and the whole KV cache for each (bound by
memory bandwidth). **TTFT** (time to first token) is queue + tokenization + prefill; **TPOT** (time per
output token) is the mean gap after it; **tokens/s** is new tokens over the whole request. Batching
more requests raises throughput but lengthens each one's TPOT; a long prompt lengthens TTFT.
""",
    "generation.prompt": "prompt",
    "generation.examples": "examples",
    "generation.use_cache": "use the KV cache",
    "generation.static": "static + compiled",
    "generation.static_info": "the cache allocated once for the whole run (flat in the KV plot), the decode step "
                              "compiled; the first run of a shape compiles, apart from its times",
    "generation.chat_template": "apply the chat template (when the tokenizer has one)",
    "generation.sampling": "sampling",
    "generation.temperature": "temperature (0 = greedy)",
    "generation.top_k": "top-k (0 = off)",
    "generation.top_p": "top-p",
    "generation.seed": "seed",
    "generation.go": "Generate",
    "generation.stop": "Stop",
    "generation.output": "output (streams as it is generated)",
    "generation.json": "this run as JSON (summary with the lesson's keys)",
    "generation.json_label": "run",
    "generation.no_result": "the run ended without a result",
    "generation.failed": "**Failed**: {message}",
    # A run's metrics (kvviz.ui.generation.text.metrics_markdown).
    "metrics.running": "running…",
    "metrics.failed": "**{reason}**: {error}",
    "metrics.header": "| TTFT | TPOT | tokens/s | decode tokens/s | ITL p50 / p90 / p99 | queue | prefill | "
                      "bandwidth |",
    "metrics.bandwidth": "{achieved:,.2f} GB/s, {share:.0%} of {bound:,.1f} GB/s",
    "metrics.load": "**Model load: {load}** before this request (a model loads on its first run and is kept for "
                    "the next). TTFT excludes it: the request's clock starts when the loaded model takes it.",
    "metrics.kept": "Model already loaded ({load} to get it ready): nothing waited for a load.",
    "metrics.run": "run {run_id}: {model} on {device} in {dtype}, {mode}; {prompt_tokens} prompt tokens, "
                   "{new_tokens} new, finished by {finish}.",
    "metrics.prefill_decode": "Prefill read {prompt_tokens} prompt tokens in {prefill} ({prefill_rate:,.0f} tokens/s); "
                              "decode then made one token every {tpot} ({decode_rate:,.0f} tokens/s). Prefill "
                              "moves {ratio:,.1f}× more tokens per second because it multiplies every weight by all "
                              "prompt tokens at once, while each decode step reads every weight (and the cache) for a "
                              "single token.",
    "metrics.threads": "The device worker runs this model with {threads} torch thread(s) on this CPU.",
    "metrics.random": "*Random weights: the timing and memory are real, the text is noise.*",
    "metrics.time_limit": "stopped by the time limit: this demo allows {limit:g} s per request",
    "metrics.stopped": "**{message}.**",
    # The request-lifecycle tab.
    "lifecycle.intro": """
The latest run from the live-generation tab, or the latest batch from the batch tab (its shared queue,
tokenization and prefill once, then each sequence's decode to its own end), on one time axis. A slow first
token points at its cause: a long **queue** (the device was busy), a long **prefill** (a long prompt, or a
cold model), or tokenization. Decode ticks that spread apart mean each step is getting slower (no cache, or
a growing one).
""",
    # The history tab.
    "history.intro": "Every run of this session. Download it as CSV, or overlay runs' per-token latency.",
    "history.runs": "runs",
    "history.download": "Download CSV",
    "history.pick": "runs to overlay",
    "history.empty": "pick runs to overlay",
    "history.overlay": "Per-token latency of the chosen runs",
    # Figures of one run (kvviz.ui.generation.figures).
    "fig.latency.title": "Per-token latency",
    "fig.latency.run": "run {name}",
    "fig.latency.decode": "{label}: decode",
    "fig.latency.first": "{label}: first token (TTFT)",
    "fig.latency.hover_decode": "token %{x}: %{y:,.2f} ms<extra></extra>",
    "fig.latency.hover_first": "first token after %{y:,.2f} ms (queue + prefill)<extra></extra>",
    "fig.latency.x": "output token index",
    "fig.latency.y": "ms since the previous token",
    "fig.latency.off_scale": "↑ {label}: first token {ms}, above the axis",
    "fig.kv.measured": "measured (cache tensors)",
    "fig.kv.predicted": "predicted (memory model)",
    "fig.kv.cuda": "CUDA allocator (whole run)",
    "fig.kv.title": "KV cache per step: measured and predicted",
    "fig.seq_len": "sequence length (tokens)",
    "fig.kv.y": "KV cache (MiB, 2^20 bytes)",
    "fig.phase.queued": "queued",
    "fig.phase.tokenize": "tokenize",
    "fig.phase.prefill": "prefill",
    "fig.phase.decode": "decode",
    "fig.life.span": "{name} {ms}",
    "fig.life.hover": "{name}: %{{base:,.2f}} → %{{x:,.2f}} ms long<extra></extra>",
    "fig.life.request": "request",
    "fig.life.tokens": "tokens",
    "fig.life.tokens_out": "tokens out",
    "fig.life.hover_token": "token at %{x:,.2f} ms<extra></extra>",
    "fig.life.first": "first token {ms} ",
    "fig.life.title": "Request life cycle",
    "fig.life.x": "ms since the request arrived",
    "fig.ttft.none": "no token yet",
    "fig.ttft.queue": "queue",
    "fig.ttft.tokenize": "tokenize",
    "fig.ttft.prefill": "prefill + first sample",
    "fig.ttft.title": "TTFT {ms}, by cause",
}
ZH = {
    "generation.intro": """
一个请求的一生：到达，等待设备，分词（tokenize），然后**预填充（prefill）** 用一次前向计算读完整个提示词
（一次处理很多 token：受算力限制），并采样出第一个 token。之后**解码（decode）** 每次只喂入一个 token，
每一步都要读一遍全部权重和整个 KV Cache（受显存带宽限制）。**首 token 延迟（TTFT）** = 排队 + 分词 + 预填充；
**每 token 延迟（TPOT）** 是其后相邻 token 的平均间隔；**tokens/s** 是新生成 token 数除以整个请求的耗时。
把更多请求合成一批能提高吞吐，但会拉长每个请求的 TPOT；提示词越长，TTFT 越长。
""",
    "generation.prompt": "提示词（prompt）",
    "generation.examples": "示例",
    "generation.use_cache": "使用 KV Cache",
    "generation.static": "静态缓存 + 编译",
    "generation.static_info": "整段运行的缓存一次性分配（KV 图中是一条水平线），解码步经过编译；"
                              "某个形状的第一次运行需要编译，编译时间不计入各项耗时",
    "generation.chat_template": "套用对话模板（chat template，分词器有模板时）",
    "generation.sampling": "采样",
    "generation.temperature": "温度 temperature（0 = 贪心）",
    "generation.top_k": "top-k（0 = 关闭）",
    "generation.top_p": "top-p",
    "generation.seed": "随机种子（seed）",
    "generation.go": "生成",
    "generation.stop": "停止",
    "generation.output": "输出（边生成边显示）",
    "generation.json": "本次运行的 JSON（摘要，含课程用到的字段）",
    "generation.json_label": "运行",
    "generation.no_result": "运行结束，但没有结果",
    "generation.failed": "**失败**：{message}",
    "metrics.running": "运行中…",
    "metrics.failed": "**{reason}**：{error}",
    "metrics.header": "| TTFT | TPOT | tokens/s | 解码 tokens/s | ITL p50 / p90 / p99 | 排队 | 预填充 | 带宽 |",
    "metrics.bandwidth": "{achieved:,.2f} GB/s，为上限 {bound:,.1f} GB/s 的 {share:.0%}",
    "metrics.load": "**模型加载：{load}**，在本次请求之前（模型在第一次运行时加载，之后保留复用）。TTFT "
                    "不含加载：请求的计时从已加载的模型接手它时开始。",
    "metrics.kept": "模型已经加载（准备用了 {load}）：没有等待加载。",
    "metrics.run": "运行 {run_id}：{model}，设备 {device}，精度 {dtype}，{mode}模式；提示词 {prompt_tokens} 个 token，"
                   "新生成 {new_tokens} 个，结束原因 {finish}。",
    "metrics.prefill_decode": "预填充用 {prefill} 读完 {prompt_tokens} 个提示词 token（{prefill_rate:,.0f} tokens/s）；"
                              "之后解码每 {tpot} 生成一个 token（{decode_rate:,.0f} tokens/s）。预填充每秒处理的 token "
                              "是解码的 {ratio:,.1f} 倍：它让每个权重一次乘上全部提示词 token，而解码的每一步都要为"
                              "一个 token 读一遍全部权重（以及缓存）。",
    "metrics.threads": "设备工作进程在这台 CPU 上用 {threads} 个 torch 线程运行这个模型。",
    "metrics.random": "*随机权重：计时和显存是真实的，生成的文本是噪声。*",
    "metrics.time_limit": "已因时间上限而停止：本演示每个请求最多运行 {limit:g} 秒",
    "metrics.stopped": "**{message}。**",
    "lifecycle.intro": """
实时生成页的最近一次运行，或批处理页的最近一批（共享的排队、分词和预填充只画一次，然后是每条序列各自解码到结束），
画在同一条时间轴上。第一个 token 来得慢，可以看出原因：**排队**长（设备正忙），**预填充**长（提示词长，或模型刚加载），
或是分词。解码刻度越来越稀，说明每一步越来越慢（没有缓存，或缓存在增长）。
""",
    "history.intro": "本会话的每一次运行。可下载为 CSV，或把几次运行的每 token 延迟叠在一起比较。",
    "history.runs": "运行记录",
    "history.download": "下载 CSV",
    "history.pick": "要叠加的运行",
    "history.empty": "选择要叠加的运行",
    "history.overlay": "所选运行的每 token 延迟",
    "fig.latency.title": "每 token 延迟",
    "fig.latency.run": "运行 {name}",
    "fig.latency.decode": "{label}：解码",
    "fig.latency.first": "{label}：首 token（TTFT）",
    "fig.latency.hover_decode": "第 %{x} 个 token：%{y:,.2f} ms<extra></extra>",
    "fig.latency.hover_first": "首 token 用时 %{y:,.2f} ms（排队 + 预填充）<extra></extra>",
    "fig.latency.x": "输出 token 序号",
    "fig.latency.y": "距上一个 token 的时间（ms）",
    "fig.latency.off_scale": "↑ {label}：首 token {ms}，超出纵轴",
    "fig.kv.measured": "实测（缓存张量）",
    "fig.kv.predicted": "预测（显存模型）",
    "fig.kv.cuda": "CUDA 分配器（整次运行）",
    "fig.kv.title": "每一步的 KV Cache：实测与预测",
    "fig.seq_len": "序列长度（token）",
    "fig.kv.y": "KV Cache（MiB，2^20 字节）",
    "fig.phase.queued": "排队",
    "fig.phase.tokenize": "分词",
    "fig.phase.prefill": "预填充",
    "fig.phase.decode": "解码",
    "fig.life.span": "{name} {ms}",
    "fig.life.hover": "{name}：从 %{{base:,.2f}} ms 起，持续 %{{x:,.2f}} ms<extra></extra>",
    "fig.life.request": "请求",
    "fig.life.tokens": "token",
    "fig.life.tokens_out": "输出的 token",
    "fig.life.hover_token": "token 于 %{x:,.2f} ms<extra></extra>",
    "fig.life.first": "首 token {ms} ",
    "fig.life.title": "请求生命周期",
    "fig.life.x": "自请求到达起的时间（ms）",
    "fig.ttft.none": "还没有 token",
    "fig.ttft.queue": "排队",
    "fig.ttft.tokenize": "分词",
    "fig.ttft.prefill": "预填充 + 首次采样",
    "fig.ttft.title": "TTFT {ms}，按原因拆分",
}

# The history table's column headers (the CSV keeps the keys). A key not listed is shown as it is.
COLUMNS_ZH = {
    "run": "运行", "model": "模型", "mode": "模式", "finish": "结束原因", "prompt": "提示词", "device": "设备",
    "dtype": "精度", "prompt_tokens": "提示词 token 数", "new_tokens": "新 token 数", "ttft_s": "TTFT（s）",
    "tpot_s": "TPOT（s）", "tokens_per_s": "tokens/s", "queue_s": "排队（s）", "tokenize_s": "分词（s）",
    "prefill_s": "预填充（s）", "prefill_tokens_per_s": "预填充 tokens/s", "e2e_s": "端到端（s）",
    "decode_tokens_per_s": "解码 tokens/s", "itl_p50_s": "ITL p50（s）", "itl_p90_s": "ITL p90（s）",
    "itl_p99_s": "ITL p99（s）", "bytes_per_decode_step": "每步解码读取字节", "bandwidth_achieved": "实测带宽（B/s）",
    "bandwidth_bound": "带宽上限（B/s）", "bandwidth_utilisation": "带宽利用率", "compile_s": "编译（s）",
    "load_s": "加载（s）", "kind": "类型", "label": "名称", "batch": "批次", "batch_size": "批大小", "row": "行",
    "padding": "填充 token 数", "decode_step_median_s": "解码步中位数（s）", "batch_tokens_per_s": "整批 tokens/s",
    "url": "URL", "api": "API", "arrivals": "到达方式", "concurrency": "并发", "requests": "请求数",
    "output_tokens_per_request": "每请求输出 token",
    "rate": "速率", "cancelled": "已取消", "completed": "完成数", "failed": "失败数", "duration_s": "时长（s）",
    "output_tokens": "输出 token 数", "output_tokens_per_s": "输出 tokens/s", "requests_per_s": "请求/s",
    "ttft_p50_s": "TTFT p50（s）", "ttft_p99_s": "TTFT p99（s）", "tpot_p50_s": "TPOT p50（s）",
    "tpot_p99_s": "TPOT p99（s）", "e2e_p50_s": "端到端 p50（s）", "goodput_requests_per_s": "有效吞吐（请求/s）",
}
VIEW_EN = {"load_s": "load (ms)", "ttft_s": "TTFT (ms)", "tpot_s": "TPOT (ms)", "ttft_p50_s": "TTFT p50 (ms)",
           "tpot_p50_s": "TPOT p50 (ms)"}
VIEW_ZH = {"load_s": "加载（ms）", "ttft_s": "TTFT（ms）", "tpot_s": "TPOT（ms）", "ttft_p50_s": "TTFT p50（ms）",
           "tpot_p50_s": "TPOT p50（ms）"}
EN |= {f"history.view.{key}": text for key, text in VIEW_EN.items()}
ZH |= {f"history.view.{key}": text for key, text in VIEW_ZH.items()}
EN |= {f"history.col.{key}": key for key in COLUMNS_ZH}
ZH |= {f"history.col.{key}": text for key, text in COLUMNS_ZH.items()}
register(EN, ZH)
