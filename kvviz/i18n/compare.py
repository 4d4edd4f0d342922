"""The texts of the cached-against-uncached tab: its controls, the verdict (speedup, agreement, every mode's figures,
the static mode, why the fast path is faster), the modes' names and the comparison's figures."""

from __future__ import annotations

from kvviz.i18n import register

EN = {
    "compare.intro": """
Without the cache every step re-reads the whole sequence: step *n* costs a prefill of *n* tokens, so
per-token time grows with position and total time grows quadratically. With the cache a step feeds
one token and reads the stored keys and values: per-token time stays nearly flat and total time
grows linearly. Both runs use the same prompt, settings and device, after a warm-up. In fp32 the
tokens are identical; in bf16/fp16 they may part, because the two modes multiply matrices of
different shapes, and the first position where they do is reported.

Tick **static + compiled** to run a third mode: the same cached loop on a cache allocated once for the whole
run, its decode step compiled (CUDA graphs on a GPU, inductor on the CPU). The first request of a shape
compiles (tens of seconds on a CPU; the time is reported apart), later ones reuse it. The bandwidth plot
shows how close each loop comes to the device's limit.
""",
    "compare.static": "static + compiled (third mode)",
    "compare.go": "Compare",
    "compare.with": "with the KV cache",
    "compare.without": "without the cache",
    "compare.static_text": "static + compiled",
    "compare.progress": "running every mode (after a warm-up)",
    "compare.no_result": "the comparison ended without a result",
    # The modes as the page names them (English: kvviz.engine.request.MODE_LABELS).
    "compare.mode.cached": "cached",
    "compare.mode.uncached": "uncached",
    "compare.mode.static": "cached, static + compiled",
    # The verdict (kvviz.ui.compare.text.compare_verdict).
    "compare.headline": "### {speedup:.2f}× faster with the cache{per_token}",
    "compare.per_token": " ({speedup:.2f}× per decode token)",
    "compare.where": "{agreement} {spec} on {device} in {dtype}.",
    "compare.identical": "The tokens are identical.",
    "compare.part": "The tokens part at position {position}.",
    "compare.shorter": "The tokens agree where both ran; one run stopped earlier.",
    "compare.random": "*Random weights: the timing is real, the text is noise.*",
    "compare.table_header": "| mode | TTFT | TPOT | decode tokens/s | time (no queue or compile) | × uncached | "
                            "bandwidth (decode) | of the limit |",
    "compare.bandwidth": "{achieved:,.2f} GB/s",
    "compare.share": "{share:.0%} of {bound:,.1f} GB/s",
    "compare.pace": "{ratio:.2f}× the plain cached loop per decode token",
    "compare.pace_none": "too few tokens for a per-token rate",
    "compare.agree_same": "the same tokens as the cached loop",
    "compare.agree_part": "parts from the cached loop at token {position}",
    "compare.agree_shorter": "agrees with the cached loop where both ran",
    "compare.compiled": "compiling its step took {seconds:,.1f} s, left out of its time",
    "compare.reused": "its compiled step was reused from an earlier request: no compile",
    "compare.static_line": "**{label}**: {pace}; {agree}; {compiled}. Its cache was allocated for {tokens:,} "
                           "tokens before the first step.",
    "compare.why_none": "Too few decode tokens to weigh the two loops against the bandwidth limit.",
    "compare.how_cuda": "replayed as one CUDA graph, so the GPU is handed the whole step at once",
    "compare.how_cpu": ("compiled by inductor into fused kernels, each matrix product on the kernel timed fastest "
                        "on this machine"),
    "compare.its_bandwidth": "its bandwidth",
    "compare.why_noise": "**Within noise.** The static mode took {tpot_s} per token and the plain cached loop "
                         "{tpot_c}: {ratio}× apart, less than the spread of either run's own per-token latencies "
                         "(interquartile range {spread}), so this run shows no speed-up to explain. Run it again, or "
                         "with more tokens.",
    "compare.why": "**Why the fast path is faster.** A decode step must read every weight and the cache: "
                   "{step_mb:,.1f} MB per token for the plain loop. At this device's {limit:,.1f} GB/s ({source}) "
                   "that read alone takes {floor_c}: the floor under TPOT. The plain cached loop took {tpot_c}, "
                   "{above} above the floor: Python calling the model's modules one by one, a kernel launched for "
                   "every small operation, the cache grown by a copy at every step. The static mode runs the same "
                   "step on a cache allocated once, {how}: {tpot_s} per token against a floor of {floor_s} (it reads "
                   "the whole preallocated cache, {static_mb:,.1f} MB a step, unwritten positions masked), "
                   "{share:.0%} of the limit.",
    "compare.above": " Above 100%: the limit is the speed of a measured matrix-vector product, and the compiled step "
                     "streams its packed weights faster than that probe, or finds part of them still in the caches.",
    # The comparison's figures (kvviz.ui.generation.figures).
    "fig.compare.latency": "Per-token latency, mode against mode",
    "fig.cumulative.measured": "{label}: measured",
    "fig.cumulative.bound": "{label}: roofline lower bound",
    "fig.cumulative.title": "Total time: linear with the cache, quadratic without",
    "fig.cumulative.x": "tokens generated",
    "fig.cumulative.y": "seconds since the request",
    "fig.work.name": "{label} (predicted)",
    "fig.work.title": "Work per step (predicted)",
    "fig.work.y": "GFLOP per step",
    "fig.bandwidth.share": "{share:.0%} of the limit",
    "fig.bandwidth.title": "Decode bandwidth: achieved against the device's limit",
    "fig.bandwidth.x": "mode",
    "fig.bandwidth.limit": "limit {limit:,.1f} GB/s",
}
ZH = {
    "compare.intro": """
没有缓存时，每一步都要重读整个序列：第 *n* 步相当于一次 *n* 个 token 的预填充，所以每 token 耗时随位置增长，
总耗时按平方增长。有缓存时，每一步只喂入一个 token，读取已存的 key 和 value：每 token 耗时几乎不变，总耗时线性增长。
两次运行用同一个提示词、同样的设置和设备，并都先预热。fp32 下两者生成的 token 完全相同；bf16/fp16 下可能出现分歧，
因为两种模式相乘的矩阵形状不同，页面会报告第一次出现分歧的位置。

勾选 **静态缓存 + 编译** 可运行第三种模式：同样的有缓存循环，但缓存为整次运行一次性分配，解码步经过编译
（GPU 上用 CUDA graph，CPU 上用 inductor）。某个形状的第一个请求需要编译（CPU 上几十秒，耗时单独报告），
之后的请求复用它。
带宽图显示每种循环离设备带宽上限有多近。
""",
    "compare.static": "静态缓存 + 编译（第三种模式）",
    "compare.go": "对比",
    "compare.with": "使用 KV Cache",
    "compare.without": "不使用缓存",
    "compare.static_text": "静态缓存 + 编译",
    "compare.progress": "正在运行每种模式（先预热）",
    "compare.no_result": "对比结束，但没有结果",
    "compare.mode.cached": "有缓存",
    "compare.mode.uncached": "无缓存",
    "compare.mode.static": "有缓存（静态缓存 + 编译）",
    "compare.headline": "### 有缓存快 {speedup:.2f}×{per_token}",
    "compare.per_token": "（每个解码 token 快 {speedup:.2f}×）",
    "compare.where": "{agreement}{spec}，设备 {device}，精度 {dtype}。",
    "compare.identical": "两者生成的 token 完全相同。",
    "compare.part": "两者的 token 在位置 {position} 处出现分歧。",
    "compare.shorter": "在两者都运行到的部分 token 一致；其中一次运行提前结束。",
    "compare.random": "*随机权重：计时是真实的，生成的文本是噪声。*",
    "compare.table_header": "| 模式 | TTFT | TPOT | 解码 tokens/s | 耗时（不含排队和编译） | × 无缓存 | "
                            "带宽（解码） | 占上限 |",
    "compare.bandwidth": "{achieved:,.2f} GB/s",
    "compare.share": "上限 {bound:,.1f} GB/s 的 {share:.0%}",
    "compare.pace": "每个解码 token 的速度是普通有缓存循环的 {ratio:.2f}×",
    "compare.pace_none": "token 太少，算不出每 token 速度",
    "compare.agree_same": "生成的 token 与有缓存循环相同",
    "compare.agree_part": "在第 {position} 个 token 处与有缓存循环出现分歧",
    "compare.agree_shorter": "在两者都运行到的部分与有缓存循环一致",
    "compare.compiled": "编译解码步用了 {seconds:,.1f} s，不计入它的耗时",
    "compare.reused": "编译好的解码步复用自之前的请求：无需编译",
    "compare.static_line": "**{label}**：{pace}；{agree}；{compiled}。它的缓存在第一步之前就按 {tokens:,} 个 token "
                           "分配好。",
    "compare.why_none": "解码 token 太少，无法把两种循环与带宽上限对比。",
    "compare.how_cuda": "以一个 CUDA graph 重放，GPU 一次拿到整个解码步",
    "compare.how_cpu": "由 inductor 编译成融合算子，每个矩阵乘用本机实测最快的算子",
    "compare.its_bandwidth": "其带宽",
    "compare.why_noise": "**在噪声范围内。** 静态模式每个 token 用时 {tpot_s}，普通缓存循环 {tpot_c}：相差 {ratio}×，"
                         "小于任一次运行自身逐 token 延迟的离散程度（四分位距 {spread}），所以这次运行没有可解释的"
                         "加速。请再运行一次，或生成更多 token。",
    "compare.why": "**为什么快路径更快。** 每个解码步都必须读一遍全部权重和缓存：普通循环每个 token 读 "
                   "{step_mb:,.1f} MB。按本设备 {limit:,.1f} GB/s 的带宽（{source}），光是这次读取就要 {floor_c}："
                   "这是 TPOT 的下限。普通有缓存循环用了 {tpot_c}，比下限多 {above}：Python 逐个调用模型的模块，"
                   "每个小运算都启动一个 kernel，每一步还要复制一次来扩展缓存。"
                   "静态模式在一次性分配好的缓存上运行同样的一步，"
                   "{how}：每个 token {tpot_s}，下限为 {floor_s}（它每步读取整个预分配的缓存，{static_mb:,.1f} MB，"
                   "未写入的位置被掩码屏蔽），达到上限的 {share:.0%}。",
    "compare.above": "超过 100%：这个上限是实测一次矩阵-向量乘法的速度，编译后的解码步读取打包权重比这个探测更快，"
                     "或者有一部分权重仍在 CPU/GPU 的缓存里。",
    "fig.compare.latency": "每 token 延迟：各模式对比",
    "fig.cumulative.measured": "{label}：实测",
    "fig.cumulative.bound": "{label}：屋顶线下限（roofline）",
    "fig.cumulative.title": "总耗时：有缓存线性增长，无缓存平方增长",
    "fig.cumulative.x": "已生成 token 数",
    "fig.cumulative.y": "自请求起的时间（s）",
    "fig.work.name": "{label}（预测）",
    "fig.work.title": "每步计算量（预测）",
    "fig.work.y": "每步 GFLOP",
    "fig.bandwidth.share": "上限的 {share:.0%}",
    "fig.bandwidth.title": "解码带宽：实测与设备上限",
    "fig.bandwidth.x": "模式",
    "fig.bandwidth.limit": "上限 {limit:,.1f} GB/s",
}
register(EN, ZH)
