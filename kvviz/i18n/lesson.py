"""The texts of the Lesson tab: the lesson's six questions and their answers from the visitor's measurements."""

from __future__ import annotations

from kvviz.i18n import register

EN = {
    "lesson.intro": "## The lesson's six questions\nEach answer is built from what you measured in this session. "
                    "Run something (each question's button opens the view that shows it, already set up), then "
                    "press **Answer with my measurements**.",
    "lesson.refresh": "Answer with my measurements",
    "lesson.open": "Show me",
    "lesson.q1": "1. In your own words, draw the life cycle of one LLM request, from arriving over HTTP to streaming "
                 "its tokens back.",
    "lesson.q2": "2. How do prefill and decode differ in input shape, attention computation and performance "
                 "bottleneck?",
    "lesson.q3": "3. Write the KV Cache memory formula and explain what each variable means.",
    "lesson.q4": "4. Why does the KV Cache grow linearly with batch, seq_len and layers?",
    "lesson.q5": "5. What do TTFT, TPOT and throughput each measure? What trade-offs are common between them?",
    "lesson.q6": "6. If a service's first token is slow but later tokens are fast, what would you check first?",
    "lesson.pending": "*Press **Answer with my measurements**.*",
    "lesson.script.title": "## The lesson's script\nThe lesson's own loop (prefill the whole prompt, then feed only "
                           "the last token with past_key_values, greedy, stop at EOS), run on the chosen model, beside "
                           "kvviz's engine on the same prompt and settings (the raw prompt, no chat template).",
    "lesson.script.prompt": "prompt",
    "lesson.script.max_new": "max new tokens",
    "lesson.script.run": "Run the lesson's script",
    "lesson.script.script": "the script's dict",
    "lesson.script.kvviz": "kvviz's metrics for the same request",
    "lesson.script.what": "the lesson script",
    "lesson.script.same": "**The same {n} tokens** from the script and from kvviz's loop: prompt_tokens {prompt} and "
                          "new_tokens {new} agree.",
    "lesson.script.differ": "**The tokens differ**: the script made {script_new} new tokens, kvviz's loop {new}.",
    "lesson.q6.busy": "To see the queue grow, start a batch (Batch tab) first, then press Generate while the device "
                      "is busy: the run's TTFT then includes the wait.",
    "lesson.none.run": "Nothing measured yet: press **Show me**, then **Generate**, then **Answer with my "
                       "measurements** again.",
    "lesson.a1": "**Run {run}** ({model}, {mode}), each moment in time since the request was received:\n\n"
                 "| phase | at |\n|---|---|\n"
                 "| queued, waiting for the device | 0 → {queue} |\n"
                 "| tokenized ({prompt_tokens} prompt tokens) | {tokenized} |\n"
                 "| prefill done: the first token (TTFT) | {ttft} |\n"
                 "| decode: {decode_tokens} more tokens, one per forward pass | {ttft} → {e2e} |\n"
                 "| finished ({finish}) | {e2e} |\n\n"
                 "On a server the path starts with the HTTP request, and each token is streamed back as soon as it "
                 "is decoded, until the stream ends: the Serving tab measures that path from the client.",
    "lesson.a2": "**Prefill** (run {run}): input [1, {prompt_tokens}], the whole prompt in one forward pass; attention "
                 "is {prompt_tokens} queries against {prompt_tokens} keys. It read {prompt_tokens} tokens in "
                 "{prefill} ({prefill_rate} tokens/s): every weight multiplies all prompt tokens at once, so it is "
                 "bound by compute.\n\n**Decode**: input [1, 1], one token per pass; attention is 1 query against "
                 "the cached keys. {decode_rate} tokens/s, TPOT {tpot}: each pass reads every weight and the whole "
                 "cache for a single token, so it is bound by memory bandwidth. Prefill moved {ratio}× more tokens "
                 "per second.",
    "lesson.a2.short": "Run {run} made too few tokens to time decode: run a longer answer (**Show me**).",
    "lesson.a3": "kv_bytes = batch × seq_len × layers × 2 × kv_heads × head_dim × bytes_per_elem\n\n"
                 "batch: sequences held at once; seq_len: tokens each one has; layers: every layer keeps its own; "
                 "2: one K and one V; kv_heads: the key/value heads (fewer than the query heads with GQA); "
                 "head_dim: each head's width; bytes_per_elem: 2 in bf16/fp16, 4 in fp32.\n\n"
                 "**{model}** ({layers} layers, {kv_heads} KV heads, head_dim {head_dim}, {dtype}): one token "
                 "holds {layers} × 2 × {kv_heads} × {head_dim} × {elem} = {per_token:,} bytes; batch 16 × "
                 "seq_len 4096 = {total_gib:,.3f} GiB. The lesson's example (32 layers, 32 KV heads, head_dim 128, "
                 "bf16): 16 × 4096 × 32 × 2 × 32 × 128 × 2 bytes = 32 GiB, before the weights.",
    "lesson.a3.example": "kv_bytes = batch × seq_len × layers × 2 × kv_heads × head_dim × bytes_per_elem\n\n"
                         "batch: sequences held at once; seq_len: tokens each one has; layers: every layer keeps its "
                         "own; 2: one K and one V; kv_heads: the key/value heads (fewer than the query heads with "
                         "GQA); head_dim: each head's width; bytes_per_elem: 2 in bf16/fp16, 4 in fp32.\n\n"
                         "The lesson's example (32 layers, 32 KV heads, head_dim 128, bf16): 16 × 4096 × 32 × 2 × 32 "
                         "× 128 × 2 bytes = 32 GiB, before the weights. Choose a model kvviz knows without "
                         "downloading (tiny, or random: and a calculator preset, such as random:llama-2-7b) to see its "
                         "own numbers.",
    "lesson.a4": "Run {run} measured the cache at every step: {first_bytes:,} bytes after {first_len} tokens, "
                 "{last_bytes:,} bytes after {last_len}. That is {per_token:,} bytes per token at the first step and "
                 "{last_per_token:,} at the last: {linear}. Each token adds one K and one V vector per layer per KV "
                 "head, and each sequence of a batch holds its own: the bytes are a product of batch, seq_len and "
                 "layers, so doubling any one doubles them.",
    "lesson.a4.linear": "the same at every step, so the cache grows linearly",
    "lesson.a4.not_linear": "not constant (a sliding window or a preallocated cache)",
    "lesson.a4.uncached": "Run {run} ran without the cache: run one with it (**Show me**).",
    "lesson.a5": "TTFT: how long a user waits for the first token (queue + prefill). TPOT: the time between later "
                 "tokens (how fast the text flows). Throughput: tokens per second the whole system makes (what it "
                 "costs). Measured here:\n\n| {what} | in flight | tokens/s | TTFT | TPOT |\n|---|---|---|---|---|\n"
                 "{rows}",
    "lesson.a5.row": "| {label} | {in_flight} | {rate} | {ttft} | {tpot} |",
    "lesson.a5.tradeoff": "From {low} to {high} in flight: throughput × {rate_ratio}, TPOT × {tpot_ratio}. More "
                          "requests share each decode step, so the machine makes more tokens per second while each "
                          "request's tokens come slower; prefills of new requests also delay the others.",
    "lesson.a5.one": "Only one level measured: run the Batch tab's sweep (**Show me**) to see the trade-off.",
    "lesson.a5.none": "TTFT: how long a user waits for the first token. TPOT: the time between later tokens. "
                      "Throughput: tokens per second the whole system makes. Nothing batched measured yet: run the "
                      "Batch tab's sweep (**Show me**), a batch, or a load on the Serving tab.",
    "lesson.a5.what": "run",
    "lesson.a5.plan": "Predict it: **Plan it** opens the Plan tab at {in_flight} requests in flight (a closed loop), "
                      "where the simulator draws the whole curve on a GPU or on this machine: tokens/s per user "
                      "against total tokens/s, and the knee past which more in flight only adds waiting.",
    "lesson.a5.batch": "batch {batch} ({rows} rows, {decoded} decoded)",
    "lesson.a6": "Run {run}: TTFT {ttft} = queue {queue} + tokenization {tokenize} + prefill {prefill} "
                 "({prompt_tokens} prompt tokens). The largest part: **{largest}**.\n\nCheck first: the queue "
                 "(requests waiting for the device or a batch slot: more replicas, admit prefills sooner, cap the "
                 "batch); then the prompt's length and prefill (prefix cache, chunked prefill, a shorter system "
                 "prompt); then tokenization and the network (TTFT seen by the client against the server's). "
                 "Fast later tokens mean decode is fine: the time is lost before the first token.",
    "lesson.a6.plan": "Predict it: **Plan it** opens the Plan tab with this run's {prompt_tokens}-token prompts: its "
                      "TTFT figure shows the queue, not the prefill, taking over TTFT as the rate nears the knee.",
    "lesson.plan": "Plan it",
    "lesson.part.queue": "queue",
    "lesson.part.tokenize": "tokenization",
    "lesson.part.prefill": "prefill",
}
ZH = {
    "lesson.intro": "## 课程的六个问题\n每个回答都来自你在本次会话中的测量。先运行（每个问题的按钮会打开展示它的页面，"
                    "并已设置好），再点 **用我的测量回答**。",
    "lesson.refresh": "用我的测量回答",
    "lesson.open": "带我去看",
    "lesson.q1": "1. 用自己的话画出一次 LLM 请求从 HTTP 进入到 streaming 返回的生命周期。",
    "lesson.q2": "2. prefill 和 decode 在输入形态、attention 计算、性能瓶颈上有什么不同？",
    "lesson.q3": "3. 写出 KV Cache 显存估算公式，解释每个变量的含义。",
    "lesson.q4": "4. 为什么 KV Cache 会随 batch、seq_len 和 layers 线性增长？",
    "lesson.q5": "5. TTFT、TPOT、throughput 分别衡量什么？它们之间有哪些常见权衡？",
    "lesson.q6": "6. 如果一个服务首 token 很慢但后续 token 很快，你会优先检查哪些环节？",
    "lesson.pending": "*点 **用我的测量回答**。*",
    "lesson.script.title": "## 课程里的脚本\n课程自己的循环（先预填充整段 prompt，之后只喂最后一个 token 并传回 "
                           "past_key_values，贪心解码，遇到 EOS 停止），在所选模型上运行，旁边是 kvviz 引擎在同一 "
                           "prompt 和设置下的结果（原始 prompt，不套对话模板）。",
    "lesson.script.prompt": "提示词（prompt）",
    "lesson.script.max_new": "最多生成 token 数",
    "lesson.script.run": "运行课程脚本",
    "lesson.script.script": "脚本输出的字典",
    "lesson.script.kvviz": "kvviz 对同一请求的测量",
    "lesson.script.what": "课程脚本",
    "lesson.script.same": "**脚本与 kvviz 的循环生成了相同的 {n} 个 token**：prompt_tokens {prompt} 与 "
                          "new_tokens {new} 一致。",
    "lesson.script.differ": "**token 不一致**：脚本生成了 {script_new} 个新 token，kvviz 的循环生成了 {new} 个。",
    "lesson.q6.busy": "想看到排队变长：先在批处理（Batch）页启动一个 batch，再在设备忙时点生成：这次运行的首 token "
                      "延迟（TTFT）就包含了等待。",
    "lesson.none.run": "还没有测量：点 **带我去看**，再点生成，然后再点一次 **用我的测量回答**。",
    "lesson.a1": "**运行 {run}**（{model}，{mode}），各时刻均从收到请求起计：\n\n"
                 "| 阶段 | 时刻 |\n|---|---|\n"
                 "| 排队（queue），等待设备 | 0 → {queue} |\n"
                 "| 分词（tokenize）完成（{prompt_tokens} 个 prompt token） | {tokenized} |\n"
                 "| 预填充（prefill）完成：第一个 token（TTFT） | {ttft} |\n"
                 "| 解码（decode）：再生成 {decode_tokens} 个 token，每次前向一个 | {ttft} → {e2e} |\n"
                 "| 结束（{finish}） | {e2e} |\n\n"
                 "在服务器上，这条路径从 HTTP 请求开始，每个 token 解码出来就立刻以流式返回，直到流结束："
                 "服务（Serving）页从客户端测量这条路径。",
    "lesson.a2": "**预填充（prefill）**（运行 {run}）：输入 [1, {prompt_tokens}]，整段 prompt 一次前向；"
                 "attention 是 {prompt_tokens} 个 query 对 {prompt_tokens} 个 key。它用 {prefill} 读完 "
                 "{prompt_tokens} 个 token（{prefill_rate} tokens/s）：每个权重一次乘上所有 prompt token，"
                 "瓶颈在算力。\n\n**解码（decode）**：输入 [1, 1]，每次前向一个 token；attention 是 1 个 query "
                 "对缓存中的 key。{decode_rate} tokens/s，每 token 延迟（TPOT）{tpot}：每次前向为一个 token "
                 "读一遍全部权重和整个缓存，瓶颈在显存带宽。预填充每秒处理的 token 是解码的 {ratio} 倍。",
    "lesson.a2.short": "运行 {run} 生成的 token 太少，无法测解码：生成一段更长的回答（**带我去看**）。",
    "lesson.a3": "kv_bytes = batch × seq_len × layers × 2 × kv_heads × head_dim × bytes_per_elem\n\n"
                 "batch：同时保存的序列数（批大小）；seq_len：每条序列的 token 数（序列长度）；layers：每一层各存"
                 "一份；2：K 和 V 各一份；kv_heads：key/value 注意力头数（GQA 时少于 query 头）；head_dim：每个头的"
                 "维度；bytes_per_elem：bf16/fp16 为 2，fp32 为 4。\n\n"
                 "**{model}**（{layers} 层，{kv_heads} 个 KV 头，head_dim {head_dim}，{dtype}）：每个 token 占 "
                 "{layers} × 2 × {kv_heads} × {head_dim} × {elem} = {per_token:,} 字节；batch 16 × seq_len 4096 = "
                 "{total_gib:,.3f} GiB。课程的例子（32 层，32 个 KV 头，head_dim 128，bf16）："
                 "16 × 4096 × 32 × 2 × 32 × 128 × 2 字节 = 32 GiB，还没算模型权重。",
    "lesson.a3.example": "kv_bytes = batch × seq_len × layers × 2 × kv_heads × head_dim × bytes_per_elem\n\n"
                         "batch：同时保存的序列数（批大小）；seq_len：每条序列的 token 数（序列长度）；layers：每一层"
                         "各存一份；2：K 和 V 各一份；kv_heads：key/value 注意力头数（GQA 时少于 query 头）；"
                         "head_dim：每个头的维度；bytes_per_elem：bf16/fp16 为 2，fp32 为 4。\n\n"
                         "课程的例子（32 层，32 个 KV 头，head_dim 128，bf16）：16 × 4096 × 32 × 2 × 32 × 128 × 2 "
                         "字节 = 32 GiB，还没算模型权重。选一个 kvviz 无需下载就认识的模型（tiny，或 random: 加一个"
                         "计算器预设，如 random:llama-2-7b），即可看到它自己的数字。",
    "lesson.a4": "运行 {run} 在每一步都测量了缓存：{first_len} 个 token 后为 {first_bytes:,} 字节，{last_len} 个 "
                 "token 后为 {last_bytes:,} 字节。即第一步每 token {per_token:,} 字节，最后一步每 token "
                 "{last_per_token:,} 字节：{linear}。每个 token 在每层、每个 KV 头各加一个 K 和一个 V 向量，"
                 "batch 中每条序列各存一份：字节数是 batch、seq_len 与 layers 的乘积，任一项翻倍，字节数就翻倍。",
    "lesson.a4.linear": "每一步都相同，所以缓存线性增长",
    "lesson.a4.not_linear": "并不恒定（滑动窗口或预分配的缓存）",
    "lesson.a4.uncached": "运行 {run} 没有使用缓存：用缓存再运行一次（**带我去看**）。",
    "lesson.a5": "TTFT：用户等到第一个 token 要多久（排队 + 预填充）。TPOT：之后 token 之间的间隔（文字流出多快）。"
                 "吞吐（throughput）：整个系统每秒生成的 token 数（成本）。本次测量：\n\n"
                 "| {what} | 并发数 | tokens/s | TTFT | TPOT |\n|---|---|---|---|---|\n{rows}",
    "lesson.a5.row": "| {label} | {in_flight} | {rate} | {ttft} | {tpot} |",
    "lesson.a5.tradeoff": "并发从 {low} 到 {high}：吞吐 × {rate_ratio}，TPOT × {tpot_ratio}。更多请求共享每一步解码，"
                          "机器每秒生成的 token 更多，而每个请求的 token 来得更慢；新请求的预填充也会拖慢其他请求。",
    "lesson.a5.one": "只测了一个并发水平：运行批处理（Batch）页的扫描（**带我去看**）即可看到这种权衡。",
    "lesson.a5.none": "TTFT：用户等到第一个 token 要多久。TPOT：之后 token 之间的间隔。吞吐（throughput）：整个系统"
                      "每秒生成的 token 数。还没有批量测量：运行批处理（Batch）页的扫描（**带我去看**）、"
                      "一个 batch，或服务（Serving）页的一次负载。",
    "lesson.a5.what": "运行",
    "lesson.a5.plan": "预测一下：**去规划** 会打开规划（Plan）页，在途请求数为 {in_flight}（闭环），"
                      "模拟器在 GPU 或本机上画出整条曲线：每用户 token/秒 与总 token/秒 的权衡，"
                      "以及拐点：过了它，更多在途请求只会增加等待。",
    "lesson.a5.batch": "批次 {batch}（{rows} 行，{decoded} 行进入解码）",
    "lesson.a6": "运行 {run}：TTFT {ttft} = 排队 {queue} + 分词 {tokenize} + 预填充 {prefill}（{prompt_tokens} 个 "
                 "prompt token）。最大的一项：**{largest}**。\n\n优先检查：排队（请求在等设备或 batch 的空位："
                 "加副本、让预填充更早被接纳、限制批大小）；然后是 prompt 长度与预填充（前缀缓存、分块预填充、"
                 "更短的系统提示词）；再是分词与网络（客户端看到的 TTFT 对比服务端的）。后续 token 很快说明解码"
                 "没问题：时间耗在第一个 token 之前。",
    "lesson.a6.plan": "预测一下：**去规划** 会用这次运行的 {prompt_tokens} 个 token 的 prompt 打开规划（Plan）页："
                      "它的 TTFT 图显示，速率接近拐点时，占据 TTFT 的是排队，而不是预填充。",
    "lesson.plan": "去规划",
    "lesson.part.queue": "排队",
    "lesson.part.tokenize": "分词",
    "lesson.part.prefill": "预填充",
}
register(EN, ZH)
