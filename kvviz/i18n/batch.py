"""The texts of the Batch tab: one batch run (its headline, its table, its figures) and the batch sweep (its
explanation and its four panels, kvviz.ui.batch.sweep_text and kvviz.ui.batch.sweep_figures).

Numbers reach these templates already formatted ("3.05 ms", "1,234"), so both languages show the same digits.
Plotly hover templates keep their %{...} placeholders: single braces where the text takes no fields (t() leaves
it unformatted), doubled where it does.
"""

from __future__ import annotations

from kvviz.i18n import register

EN = {
    # the tab's static texts
    "batch.intro": """
The lesson's memory formula has a batch term (question 4) and its question 5 asks what throughput costs in
latency. Here kvviz's own engine decodes **B prompts together**: they are left-padded to the longest, one
prefill pass reads them all, then every decode pass feeds one token per row. A decode pass reads every weight
once for the whole batch, so while it is bound by memory (or by the fixed cost of a pass) B rows cost about what
one does, and tokens/s grows about B-fold; each row's cache adds to memory linearly. The **sweep** measures
B = 1, 2, 4, ... beside the roofline's prediction for this device.
""",
    "batch.prompts": "prompts, one per line (cycled to fill the batch; different lengths show the padding)",
    "batch.size": "batch size B",
    "batch.use_cache": "use the KV cache",
    "batch.ignore_eos": "ignore EOS (every row runs to max new tokens)",
    "batch.chat_template": "apply the chat template to each prompt (when the tokenizer has one)",
    "batch.run": "Run batch",
    "batch.rows": "one row per sequence",
    "batch.sweep.heading": "### The batch sweep: B = 1, 2, 4, ... measured beside the roofline's prediction",
    "batch.sweep.prompt_tokens": "prompt tokens",
    "batch.sweep.new_tokens": "new tokens per sequence",
    "batch.sweep.max_batch": "largest B",
    "batch.sweep.run": "Run sweep",
    # field names inside refusals, and the tab's own refusals
    "batch.field.batch_size": "batch size",
    "batch.field.max_new_tokens": "max new tokens",
    "batch.field.use_cache": "use the KV cache",
    "batch.field.ignore_eos": "ignore EOS",
    "batch.field.chat_template": "chat template",
    "batch.field.new_tokens": "new tokens",
    "batch.field.max_batch": "largest B",
    "batch.field.prompts": "prompts",
    "batch.error.no_prompts": "no prompts: write one per line",
    "batch.error.prompt_limit": "prompt tokens is {tokens}; this demo allows up to {limit}",
    "batch.what.batch": "the batch",
    "batch.what.sweep": "the sweep",
    # one batch's headline (kvviz.ui.batch.run_text.batch_markdown)
    "batch.md.headline": "### {batch_size} sequences decoded together: {rate} tokens/s in all, {rate_seq} per sequence",
    "batch.md.body": "{model} on {device} in {dtype}, {mode}. One prefill pass read every row's prompt "
                     "({prompt_tokens} tokens, left-padded to {padded_len} each) in {prefill}: every row's first token "
                     "came at {ttft}. Then each decode pass fed one token per row in {step} (median over {steps} "
                     "passes). The cache peaked at {peak} MiB, of which {padding} MiB held padding; measured from its "
                     "tensors, it equals the memory model's batch × seq_len × layers × 2 × kv_heads × head_dim × bytes "
                     "at every pass (the KV plot).",
    "batch.md.why": "A decode pass reads every weight once for the whole batch, and each row adds only its own cache "
                    "and its own arithmetic: while the pass is bound by reading memory (or, on a small model, by the "
                    "fixed cost of launching it), B rows cost about what one does. The batch sweep below measures "
                    "that.",
    "batch.md.random": "*Random weights: the timing and memory are real, the text is noise.*",
    # the per-sequence table's columns, and the history's label
    "batch.col.row": "row",
    "batch.col.prompt_tokens": "prompt_tokens",
    "batch.col.padding": "padding",
    "batch.col.new_tokens": "new_tokens",
    "batch.col.finish": "finish",
    "batch.col.end_ms": "end_ms",
    "batch.col.prompt": "prompt",
    "batch.col.text": "text",
    "batch.history.label": "batch {batch} row {row}",
    "batch.sweep.history.label": "sweep {sweep} B={batch}",
    # one batch's figures (kvviz.ui.batch.run_figures)
    "batch.fig.phase.queued": "queued",
    "batch.fig.phase.tokenize": "tokenize",
    "batch.fig.phase.prefill": "prefill",
    "batch.fig.shared": "batch of {size} (shared)",
    "batch.fig.phase_bar": "{name} {ms}",
    "batch.fig.phase_hover": "{name}: %{{base:,.2f}} → %{{x:,.2f}} ms long<extra></extra>",
    "batch.fig.row": "row {row}",
    "batch.fig.decode": "decode (each row to its own end)",
    "batch.fig.decode_hover": "%{y}: %{customdata[0]} tokens, ended by %{customdata[1]}<extra></extra>",
    "batch.fig.tokens_out": "tokens out",
    "batch.fig.token_hover": "token at %{x:,.2f} ms<extra></extra>",
    "batch.fig.first_token": " every row's first token {ms}",
    "batch.fig.lifecycle_title": "A batch's life cycle: shared phases once, then one row per sequence",
    "batch.fig.lifecycle_x": "ms since the batch arrived",
    "batch.fig.no_step": "no step yet",
    "batch.fig.decode_pass": "decode pass",
    "batch.fig.step_hover": "step %{x}: %{y:,.2f} ms<extra></extra>",
    "batch.fig.prefill_pass": "prefill (every row's prompt)",
    "batch.fig.prefill_hover": "prefill: %{y:,.2f} ms<extra></extra>",
    "batch.fig.active_rows": "rows still decoding (right axis)",
    "batch.fig.steps_title": "Each forward pass of the batch",
    "batch.fig.steps_x": "step (0 = prefill)",
    "batch.fig.steps_y": "ms per pass (log)",
    "batch.fig.rows_axis": "rows",
    "batch.fig.no_kv": "no KV cache (an uncached batch keeps none)",
    "batch.fig.kv_measured": "measured (cache tensors)",
    "batch.fig.kv_predicted": "predicted (B × seq_len × layers × 2 × ...)",
    "batch.fig.kv_padding": "of which padding",
    "batch.fig.kv_title": "KV cache of the whole batch, per pass",
    "batch.fig.kv_x": "positions per row (padded)",
    "batch.fig.part.queue": "queue",
    "batch.fig.part.tokenize": "tokenize",
    "batch.fig.part.prefill": "prefill ({rows} rows)",
    "batch.fig.ttft_title": "The batch's TTFT {ttft}, by cause",
    # the sweep's explanation (kvviz.ui.batch.sweep_text)
    "batch.sweep.none": "No batch ran.",
    "batch.sweep.only": "Only B={b} ran: a decode step took {step} ({rate} tokens/s). {stopped}",
    "batch.sweep.headline": "From B={a} to B={z} the decode step went from {step_a} to {step_z} ({step_growth}×) while "
                            "tokens/s went from {rate_a} to {rate_z} ({rate_growth}×): the weights ({weights}) are "
                            "read once per step for the whole batch, and each sequence adds only its own cache "
                            "({per_seq_kv} at the end) and its own FLOPs{cheap}Each sequence's own rate went from "
                            "{seq_a} to {seq_z} tokens/s: batching trades each sequence's latency for the batch's "
                            "throughput. {stopped}",
    "batch.sweep.headline_noise": "From B={a} to B={z} tokens/s went from {rate_a} to {rate_z}, but a decode step "
                                  "ranged {range_a} at B={a} and {range_z} at B={z}: at those extremes B={z} does not "
                                  "beat B={a}, so the two are within noise and this sweep shows no gain from batching "
                                  "to explain. {stopped}",
    "batch.sweep.cheap": ", so a bigger batch is nearly free per step. ",
    "batch.sweep.not_cheap": ". ",
    "batch.sweep.stop.max_batch": "The sweep stopped at the largest batch asked for (B={b}).",
    "batch.sweep.stop.memory": "The sweep stopped at B={b}: the next batch would not fit by the calculator (memory "
                               "runs out after B={limit}).",
    "batch.sweep.stop.cancelled": "The sweep was stopped after B={b}.",
    "batch.sweep.stop.other": "The sweep stopped after B={b}: {reason}.",
    "batch.sweep.ridge": "this device's ridge point ({ridge} FLOP/B = {peak} GFLOP/s / {bandwidth} GB/s)",
    "batch.sweep.never_compute": "By the roofline the step never turns compute-bound here: its FLOPs per byte level "
                                 "off below {ridge}.",
    "batch.sweep.compute_beyond": "By the roofline the step stays memory-bound over the whole sweep: its FLOPs per "
                                  "byte reach {ridge} only at B={cb}, beyond B={last}.",
    "batch.sweep.compute_inside": "From B={cb} the roofline turns compute-bound: the step's FLOPs per byte "
                                  "({intensity} at B={last}) pass {ridge}, and its predicted step grows with B, "
                                  "{pred_base} at B={base} to {pred_last} at B={last} ({pred_growth}×); measured, the "
                                  "step grew {growth}× over the same batches. At B={last} it does {gflop} GFLOP in "
                                  "{step}: {achieved} GFLOP/s, {share} of the peak this device reached with one large "
                                  "matmul; a decode step's matmuls are thin (B rows).",
    "batch.sweep.first_step": "At B={b} the step moves {moved} in {step}: {reached} GB/s, {share} of the {bandwidth} "
                              "GB/s this device measured.",
    "batch.sweep.first_near": " A batch of one is a memory-bound step, as the roofline says.",
    "batch.sweep.first_overhead": " The roofline counts bytes moved and FLOPs, not the fixed cost of running a step "
                                  "(Python, and a kernel launch for every operation of every layer), which on a model "
                                  "whose weights read in {weights_time} is most of the step.",
    "batch.sweep.kernel_switch": "From B={a} to B={b} the measured step grew {grew}× ({step_a} to {step_b}) where the "
                                 "roofline's grows {predicted}×: the bound assumes every kernel streams the weights at "
                                 "the measured bandwidth, which was measured with a matrix-vector product, the kernel "
                                 "a batch of one runs; two rows or more run matrix-matrix kernels, which on a CPU can "
                                 "read the same weights more slowly.",
    "batch.sweep.rising_compute": "Past B={low} the ratio rises again, to {ratio} at B={b}: the measured step grows "
                                  "faster than the roofline's as the step's arithmetic grows, below the device's peak "
                                  "(above).",
    "batch.sweep.rising_memory": "Past B={low} the ratio rises again, to {ratio} at B={b}: the measured step grows "
                                 "faster than the roofline's: the roofline counts the weights and the cache, not the "
                                 "activations each step writes and reads again, nor the attention's own kernels, and "
                                 "those grow with B.",
    "batch.sweep.departure_one": "The roofline predicted a step of {pred} at B={b}, a lower bound; measured / "
                                 "predicted is {ratio}. ",
    "batch.sweep.departure": "The roofline predicted a step of {pred_a} at B={a} and {pred_z} at B={z} ({growth}×), a "
                             "lower bound; measured / predicted is {ratio_a} at B={a} and {ratio_z} at B={z} (lowest "
                             "{lowest}, at B={low_b}).",
    "batch.sweep.shared_cost": "The batch shares the fixed cost, so the ratio falls to {lowest} at B={low_b}.",
    "batch.sweep.sentence_gap": " ",
    "batch.sweep.prefill_one": "The prefill (every sequence's TTFT) took {prefill}.",
    "batch.sweep.prefill": "TTFT, the batch's prefill, went from {pa} at B={a} to {pz} at B={z} ({growth}×){reading} "
                           "The roofline calls the prefill {bounds}, and the measured prefill is {lo}-{hi}× its lower "
                           "bound.",
    "batch.sweep.prefill_grew": ": every sequence waits for all B prompts ({b} × {tokens} tokens) to pass through the "
                                "model before its first token.",
    "batch.sweep.prefill_flat": ": it did not grow here, so the smaller batch's prefill was slowed by something else "
                                "(the machine's other work, a cold first pass); in general every sequence waits for "
                                "all B prompts.",
    "batch.bound.memory": "memory-bound",
    "batch.bound.compute": "compute-bound",
    "batch.bound_short.memory": "memory",
    "batch.bound_short.compute": "compute",
    "batch.sweep.bound_all": "{kind} at every batch",
    "batch.sweep.bound_at": "{kind} at B={b}",
    "batch.sweep.bound_from": "{kind} from B={b}",
    "batch.sweep.list_sep": ", ",
    "batch.sweep.kv_equal": "equal to the memory model's prediction at every batch, to the byte",
    "batch.sweep.kv_differ": "different from the memory model's prediction at B={batches}",
    "batch.sweep.kv": "The cache after the last step held {kv} at B={b}, {agree}: B × {per_seq} per sequence, linear "
                      "in the batch. The calculator's KV budget is {budget} GiB ({accelerator}: memory × mem_util − "
                      "weights − reserve), so memory runs out after B={limit} sequences of {tokens} tokens.",
    "batch.table.header": "| B | decode step | roofline | measured / roofline | bound (roofline) | tokens/s total | "
                          "tokens/s per sequence | TTFT (prefill) | KV measured | = predicted |",
    "batch.table.yes": "yes",
    "batch.table.no": "no ({predicted})",
    # the sweep's figures (kvviz.ui.batch.sweep_figures)
    "batch.panel.step": "Decode step time",
    "batch.panel.throughput": "Tokens/s, total and per sequence",
    "batch.panel.prefill": "TTFT: the batch's prefill",
    "batch.panel.kv": "KV cache after the last step",
    "batch.panel_y.step": "ms per decode step (log)",
    "batch.panel_y.throughput": "tokens/s (log)",
    "batch.panel_y.prefill": "ms (log)",
    "batch.panel_y.kv": "MiB (log)",
    "batch.panel.x": "batch size B (log)",
    "batch.panel.empty": "Run a batch sweep to see this",
    "batch.panel.overview": "Batch sweep: measured against the roofline",
    "batch.trace.step_measured": "measured step (median)",
    "batch.trace.step_roofline": "roofline: max(bytes / bandwidth, FLOPs / peak)",
    "batch.trace.step_compute": "roofline: FLOPs / peak alone",
    "batch.trace.compute_rule": "compute-bound from B={b} ",
    "batch.trace.compute_rule_name": "compute-bound batch (roofline)",
    "batch.trace.total_measured": "total tokens/s, measured",
    "batch.trace.total_roofline": "total tokens/s, roofline",
    "batch.trace.seq_measured": "per sequence, measured",
    "batch.trace.seq_roofline": "per sequence, roofline",
    "batch.trace.prefill_measured": "prefill, measured",
    "batch.trace.prefill_roofline": "prefill, roofline",
    "batch.trace.kv_predicted": "KV predicted (memory model)",
    "batch.trace.kv_measured": "KV measured (cache tensors)",
    "batch.trace.kv_budget": "KV budget (calculator): {gib} GiB",
    "batch.trace.memory_rule": "memory runs out after B={b} ",
    "batch.trace.memory_rule_name": "memory-limit batch (calculator)",
    "batch.note.never_compute": "never compute-bound (roofline)",
    "batch.note.compute_beyond": "compute-bound from B={b} (roofline), beyond the sweep",
    "batch.note.memory": "memory runs out after B={b} (calculator)",
}

ZH = {
    "batch.intro": """
课程里的显存公式有一项批大小（第 4 题），第 5 题问吞吐要用多少延迟来换。这里由 kvviz 自己的引擎**把 B 个提示词
放在一起解码**：它们左填充到最长的那个，一次预填充（prefill）读完全部提示词，之后每次解码前向为每行输入一个 token。
一次解码前向为整个批次只读一遍全部权重，所以只要它受限于访存（或受限于每次前向的固定开销），B 行的代价就和 1 行
差不多，tokens/s 约增长 B 倍；而每行的 KV Cache 让显存线性增长。下面的**扫描**在本设备上测量 B = 1, 2, 4, ...，
并与屋顶线模型（roofline）的预测并排对比。
""",
    "batch.prompts": "提示词，每行一个（循环填满批次；长度不同才能看到填充）",
    "batch.size": "批大小 B",
    "batch.use_cache": "使用 KV Cache",
    "batch.ignore_eos": "忽略 EOS（每行都生成到最大新 token 数）",
    "batch.chat_template": "给每个提示词套用对话模板（chat template，分词器有模板时）",
    "batch.run": "运行批处理",
    "batch.rows": "每条序列一行",
    "batch.sweep.heading": "### 批处理扫描：测量 B = 1, 2, 4, ...，与屋顶线模型的预测并排对比",
    "batch.sweep.prompt_tokens": "提示词 token 数",
    "batch.sweep.new_tokens": "每条序列的新 token 数",
    "batch.sweep.max_batch": "最大 B",
    "batch.sweep.run": "运行扫描",
    "batch.field.batch_size": "批大小",
    "batch.field.max_new_tokens": "最大新 token 数",
    "batch.field.use_cache": "使用 KV Cache",
    "batch.field.ignore_eos": "忽略 EOS",
    "batch.field.chat_template": "对话模板",
    "batch.field.new_tokens": "新 token 数",
    "batch.field.max_batch": "最大 B",
    "batch.field.prompts": "提示词",
    "batch.error.no_prompts": "没有提示词：请每行写一个",
    "batch.error.prompt_limit": "提示词 token 数为 {tokens}；本演示最多允许 {limit}",
    "batch.what.batch": "批处理",
    "batch.what.sweep": "扫描",
    "batch.md.headline": "### {batch_size} 条序列一起解码：合计 {rate} tokens/s，每条序列 {rate_seq} tokens/s",
    "batch.md.body": "{model} 运行于 {device}，{dtype}，{mode}。一次预填充前向读入了每行的提示词（共 "
                     "{prompt_tokens} 个 token，每行左填充到 {padded_len}），耗时 {prefill}："
                     "每行的首个 token 都在 {ttft} 到达。之后每次解码前向为每行输入一个 token，"
                     "耗时 {step}（{steps} 次前向的中位数）。KV Cache 峰值为 {peak} MiB，"
                     "其中 {padding} MiB 是填充；从缓存张量实测，它在每次前向都等于显存模型的 batch × seq_len × "
                     "layers × 2 × kv_heads × head_dim × bytes（见 KV 图）。",
    "batch.md.why": "一次解码前向为整个批次只读一遍全部权重，每行只增加自己的 KV Cache 和自己的计算："
                    "只要这次前向受限于访存（小模型上则受限于启动它的固定开销），B 行的代价就和 1 行差不多。"
                    "下面的批处理扫描会测量这一点。",
    "batch.md.random": "*随机权重：计时和显存是真实的，文本是噪声。*",
    "batch.col.row": "行",
    "batch.col.prompt_tokens": "提示词 token 数",
    "batch.col.padding": "填充",
    "batch.col.new_tokens": "新 token 数",
    "batch.col.finish": "结束原因",
    "batch.col.end_ms": "结束时刻 ms",
    "batch.col.prompt": "提示词",
    "batch.col.text": "文本",
    "batch.history.label": "批次 {batch} 第 {row} 行",
    "batch.sweep.history.label": "扫描 {sweep} B={batch}",
    "batch.fig.phase.queued": "排队",
    "batch.fig.phase.tokenize": "分词",
    "batch.fig.phase.prefill": "预填充",
    "batch.fig.shared": "{size} 条序列的批次（共享）",
    "batch.fig.phase_bar": "{name} {ms}",
    "batch.fig.phase_hover": "{name}：%{{base:,.2f}} 起，持续 %{{x:,.2f}} ms<extra></extra>",
    "batch.fig.row": "第 {row} 行",
    "batch.fig.decode": "解码（每行各自到结束）",
    "batch.fig.decode_hover": "%{y}：%{customdata[0]} 个 token，结束原因 %{customdata[1]}<extra></extra>",
    "batch.fig.tokens_out": "输出的 token",
    "batch.fig.token_hover": "token 于 %{x:,.2f} ms<extra></extra>",
    "batch.fig.first_token": " 每行的首个 token {ms}",
    "batch.fig.lifecycle_title": "批次的生命周期：共享阶段只画一次，然后每条序列一行",
    "batch.fig.lifecycle_x": "自批次到达起的 ms",
    "batch.fig.no_step": "还没有前向",
    "batch.fig.decode_pass": "解码前向",
    "batch.fig.step_hover": "第 %{x} 步：%{y:,.2f} ms<extra></extra>",
    "batch.fig.prefill_pass": "预填充（每行的提示词）",
    "batch.fig.prefill_hover": "预填充：%{y:,.2f} ms<extra></extra>",
    "batch.fig.active_rows": "仍在解码的行数（右轴）",
    "batch.fig.steps_title": "批次的每次前向",
    "batch.fig.steps_x": "步（0 = 预填充）",
    "batch.fig.steps_y": "每次前向 ms（对数）",
    "batch.fig.rows_axis": "行数",
    "batch.fig.no_kv": "没有 KV Cache（不使用缓存的批次不保留）",
    "batch.fig.kv_measured": "实测（缓存张量）",
    "batch.fig.kv_predicted": "预测（B × seq_len × layers × 2 × ...）",
    "batch.fig.kv_padding": "其中的填充",
    "batch.fig.kv_title": "整个批次的 KV Cache，逐次前向",
    "batch.fig.kv_x": "每行的位置数（含填充）",
    "batch.fig.part.queue": "排队",
    "batch.fig.part.tokenize": "分词",
    "batch.fig.part.prefill": "预填充（{rows} 行）",
    "batch.fig.ttft_title": "批次的首 token 延迟（TTFT）{ttft}，按成因拆分",
    "batch.sweep.none": "没有运行任何批次。",
    "batch.sweep.only": "只运行了 B={b}：一次解码步耗时 {step}（{rate} tokens/s）。{stopped}",
    "batch.sweep.headline": "从 B={a} 到 B={z}，解码步从 {step_a} 变为 {step_z}（{step_growth}×），而 tokens/s 从 "
                            "{rate_a} 变为 {rate_z}（{rate_growth}×）：权重（{weights}）每步只为整个批次读一遍，每条"
                            "序列只增加自己的 KV Cache（最后为 {per_seq_kv}）和自己的 FLOPs{cheap}每条序列自身的速率从 "
                            "{seq_a} 变为 {seq_z} tokens/s：批处理用每条序列的延迟换取整个批次的吞吐。{stopped}",
    "batch.sweep.headline_noise": "从 B={a} 到 B={z}，tokens/s 从 {rate_a} 变为 {rate_z}，但解码步在 B={a} 时为 "
                                  "{range_a}，在 B={z} 时为 {range_z}：按这两个范围的极端值，B={z} 并不胜过 B={a}，"
                                  "两者在噪声范围内，这次扫描没有可解释的批处理收益。{stopped}",
    "batch.sweep.cheap": "，所以更大的批次每步几乎不增加开销。",
    "batch.sweep.not_cheap": "。",
    "batch.sweep.stop.max_batch": "扫描停在所要求的最大批次（B={b}）。",
    "batch.sweep.stop.memory": "扫描停在 B={b}：按计算器估算，下一个批次放不下（B={limit} 之后内存耗尽）。",
    "batch.sweep.stop.cancelled": "扫描在 B={b} 之后被停止。",
    "batch.sweep.stop.other": "扫描在 B={b} 之后停止：{reason}。",
    "batch.sweep.ridge": "本设备的屋顶线拐点（ridge point，{ridge} FLOP/B = {peak} GFLOP/s / {bandwidth} GB/s）",
    "batch.sweep.never_compute": "按屋顶线模型，这里的解码步始终不会变为计算受限（compute-bound）：它每字节的 FLOPs "
                                 "停在{ridge}以下。",
    "batch.sweep.compute_beyond": "按屋顶线模型，整个扫描中解码步都是访存受限（memory-bound）：它每字节的 FLOPs 要到 "
                                  "B={cb} 才达到{ridge}，超出了 B={last}。",
    "batch.sweep.compute_inside": "从 B={cb} 起屋顶线模型判为计算受限（compute-bound）：解码步每字节的 FLOPs（B={last} "
                                  "时为 {intensity}）超过{ridge}，预测的步耗时随 B 增长，从 B={base} 的 {pred_base} "
                                  "到 B={last} 的 {pred_last}（{pred_growth}×）；实测在同样的批次之间增长了 "
                                  "{growth}×。B={last} 时一步做 {gflop} GFLOP，耗时 {step}：{achieved} GFLOP/s，是本"
                                  "设备用一次大矩阵乘达到的峰值的 {share}；解码步的矩阵乘很“瘦”（只有 B 行）。",
    "batch.sweep.first_step": "B={b} 时一步搬运 {moved}，耗时 {step}：{reached} GB/s，是本设备实测带宽 {bandwidth} "
                              "GB/s 的 {share}。",
    "batch.sweep.first_near": "单条序列的批次是访存受限的一步，与屋顶线模型一致。",
    "batch.sweep.first_overhead": "屋顶线模型只计搬运的字节和 FLOPs，不计运行一步的固定开销（Python，以及每层每个"
                                  "算子的一次 kernel 启动）；对于权重 {weights_time} 就能读完的模型，这部分占了一步的"
                                  "大头。",
    "batch.sweep.kernel_switch": "从 B={a} 到 B={b}，实测解码步增长了 {grew}×（{step_a} 到 {step_b}），而屋顶线预测只"
                                 "增长 {predicted}×：这个下界假设每个 kernel 都以实测带宽读取权重，而带宽是用矩阵-向量"
                                 "乘测的，也就是单条序列的批次所跑的 kernel；两行及以上跑的是矩阵-矩阵乘 kernel，在 "
                                 "CPU 上读同样的权重可能更慢。",
    "batch.sweep.rising_compute": "B={low} 之后比值又升高，B={b} 时达到 {ratio}：实测解码步比屋顶线预测增长得更快，"
                                  "因为一步的计算量在增长，而实际算力低于设备峰值（见上）。",
    "batch.sweep.rising_memory": "B={low} 之后比值又升高，B={b} 时达到 {ratio}：实测解码步比屋顶线预测增长得更快：屋顶"
                                 "线模型只计权重和 KV Cache，不计每步写入又读回的激活值，也不计注意力自身的 kernel，"
                                 "而这些都随 B 增长。",
    "batch.sweep.departure_one": "屋顶线模型预测 B={b} 时一步耗时 {pred}，这是下界；实测 / 预测为 {ratio}。",
    "batch.sweep.departure": "屋顶线模型预测一步在 B={a} 时耗时 {pred_a}，B={z} 时 {pred_z}（{growth}×），这是下界；"
                             "实测 / 预测在 B={a} 时为 {ratio_a}，B={z} 时为 {ratio_z}（最低 {lowest}，在 "
                             "B={low_b}）。",
    "batch.sweep.shared_cost": "批次分摊了固定开销，所以比值降到 {lowest}（B={low_b}）。",
    "batch.sweep.sentence_gap": "",
    "batch.sweep.prefill_one": "预填充（即每条序列的首 token 延迟 TTFT）耗时 {prefill}。",
    "batch.sweep.prefill": "首 token 延迟（TTFT，即批次的预填充）从 B={a} 时的 {pa} 变为 B={z} 时的 {pz}"
                           "（{growth}×）{reading}屋顶线模型判定预填充{bounds}，实测预填充是其下界的 {lo}-{hi}×。",
    "batch.sweep.prefill_grew": "：每条序列都要等全部 B 个提示词（{b} × {tokens} 个 token）走完模型，才得到自己的首个 "
                                "token。",
    "batch.sweep.prefill_flat": "：这里它没有增长，说明较小批次的预填充被别的因素拖慢了（机器上的其他负载、冷启动的"
                                "第一次前向）；一般而言，每条序列都要等全部 B 个提示词。",
    "batch.bound.memory": "访存受限",
    "batch.bound.compute": "计算受限",
    "batch.bound_short.memory": "访存",
    "batch.bound_short.compute": "计算",
    "batch.sweep.bound_all": "在每个批次都是{kind}",
    "batch.sweep.bound_at": "在 B={b} 时为{kind}",
    "batch.sweep.bound_from": "从 B={b} 起为{kind}",
    "batch.sweep.list_sep": "，",
    "batch.sweep.kv_equal": "在每个批次都与显存模型的预测相等，精确到字节",
    "batch.sweep.kv_differ": "在 B={batches} 时与显存模型的预测不同",
    "batch.sweep.kv": "最后一步之后，B={b} 的 KV Cache 占 {kv}，{agree}：B × 每条序列 {per_seq}，随批大小线性增长。"
                      "计算器给出的 KV 预算为 {budget} GiB（{accelerator}：内存 × mem_util − 权重 − 预留），所以在 "
                      "B={limit} 条 {tokens} token 的序列之后内存耗尽。",
    "batch.table.header": "| B | 解码步 | 屋顶线 | 实测 / 屋顶线 | 瓶颈（屋顶线） | 总 tokens/s | 每条序列 tokens/s | "
                          "TTFT（预填充） | KV 实测 | = 预测 |",
    "batch.table.yes": "是",
    "batch.table.no": "否（{predicted}）",
    "batch.panel.step": "解码步耗时",
    "batch.panel.throughput": "tokens/s：总计与每条序列",
    "batch.panel.prefill": "首 token 延迟（TTFT）：批次的预填充",
    "batch.panel.kv": "最后一步之后的 KV Cache",
    "batch.panel_y.step": "每个解码步 ms（对数）",
    "batch.panel_y.throughput": "tokens/s（对数）",
    "batch.panel_y.prefill": "ms（对数）",
    "batch.panel_y.kv": "MiB（对数）",
    "batch.panel.x": "批大小 B（对数）",
    "batch.panel.empty": "运行一次批处理扫描即可看到此图",
    "batch.panel.overview": "批处理扫描：实测与屋顶线模型对比",
    "batch.trace.step_measured": "实测步耗时（中位数）",
    "batch.trace.step_roofline": "屋顶线：max(字节 / 带宽, FLOPs / 峰值算力)",
    "batch.trace.step_compute": "屋顶线：仅 FLOPs / 峰值算力",
    "batch.trace.compute_rule": "从 B={b} 起计算受限 ",
    "batch.trace.compute_rule_name": "计算受限的批次（屋顶线）",
    "batch.trace.total_measured": "总 tokens/s，实测",
    "batch.trace.total_roofline": "总 tokens/s，屋顶线",
    "batch.trace.seq_measured": "每条序列，实测",
    "batch.trace.seq_roofline": "每条序列，屋顶线",
    "batch.trace.prefill_measured": "预填充，实测",
    "batch.trace.prefill_roofline": "预填充，屋顶线",
    "batch.trace.kv_predicted": "KV 预测（显存模型）",
    "batch.trace.kv_measured": "KV 实测（缓存张量）",
    "batch.trace.kv_budget": "KV 预算（计算器）：{gib} GiB",
    "batch.trace.memory_rule": "B={b} 之后内存耗尽 ",
    "batch.trace.memory_rule_name": "内存耗尽的批次（计算器）",
    "batch.note.never_compute": "始终不会计算受限（屋顶线）",
    "batch.note.compute_beyond": "从 B={b} 起计算受限（屋顶线），超出扫描范围",
    "batch.note.memory": "B={b} 之后内存耗尽（计算器）",
}
register(EN, ZH)
