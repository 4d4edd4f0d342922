"""The KV-cache calculator's texts: its tab's controls, its summary, its figures, the memory report the CLI prints,
and the English sentences of kvviz's memory model (formula labels, notes, refusals) it shows in Chinese.

Keys: calc.* for the tab and its summary, calc.fig.* for the figures, report.* for the text report. The memory
model's own English (a formula's label, a report's note) is translated by template (memory_text): the last
regex templates of kvviz, until the memory model says its labels and notes as keys (kvviz.i18n.said) as its
errors already do; FORMULA_PHRASES and UNITS translate the words inside a formula, whose identifiers (batch,
seq_len, kv_heads) stay as they are.
"""

from __future__ import annotations

import re
from functools import cache

from kvviz.i18n import normalize, register

EN = {
    # The tab's static texts (kvviz.ui.calculator.tab).
    "calc.intro": """
The KV cache keeps every layer's keys and values so that decoding a token does not recompute the
whole history. It buys that speed with memory:
**bytes = batch × seq_len × layers × 2 (K and V) × kv_heads × head_dim × bytes_per_elem**, linear in each.
Grouped-query attention shrinks `kv_heads`, sliding-window layers cap `seq_len` at the window, and
DeepSeek's latent attention stores one compressed vector per token instead of per-head keys and values.
Pick a preset or give a config.json path or hub id, then move the sliders: every figure below is
recomputed from the same formula, shown with your numbers.
""",
    "calc.preset": "preset (sets the sliders)",
    "calc.config.hosted": "or a hub id (Enter to load)",
    "calc.config.local": "or a config.json path or hub id (Enter to load)",
    "calc.config.placeholder": "Qwen/Qwen2.5-0.5B-Instruct or /path/to/config.json",
    "calc.batch": "batch (sequences at once)",
    "calc.seq_len": "seq_len (tokens per sequence)",
    "calc.layers": "layers",
    "calc.kv_heads": "kv_heads (must divide the query heads)",
    "calc.head_dim": "head_dim",
    "calc.kv_dtype": "KV dtype",
    "calc.accelerator": "accelerator",
    "calc.cpu": "this CPU (measured)",
    "calc.mem_util": "memory utilisation",
    "calc.block_size": "block size (paged allocation)",
    "calc.gpus_note": "**GPUs**: tensor parallelism (tp) splits every layer over tp GPUs, pipeline parallelism "
                      "(pp) the layers into pp stages, data parallelism (dp) copies the whole; past one GPU the "
                      "memory plot and the KV curves show one GPU",
    "calc.formulas_title": "the formulas, with your numbers",
    "calc.formulas": "formulas",
    "calc.json_title": "the whole answer as JSON (what `python -m kvviz memory --json` prints)",
    "calc.json": "report",
    # The summary (kvviz.ui.calculator.answer).
    "calc.sum.model": "**{name}** — {describe}",
    "calc.sum.modified": "{name} (modified: {what})",
    "calc.sum.kv": "### KV cache: {gib} GiB = {gb} GB",
    "calc.sum.query": "batch {batch} × seq_len {seq_len} in {dtype}; {per_token} bytes per token across all layers",
    "calc.sum.no_window": "- an engine that ignores the sliding window would allocate {bytes}",
    "calc.sum.mla_expanded": "- expanded per-head K/V (a naive implementation) would take {bytes}",
    "calc.sum.state": "- **plus the {kind} state of {layers} layers: {bytes}** for the batch ({per_seq} a sequence; "
                      "each layer {shapes}), the same at any seq_len: {why}",
    "calc.sum.paged": "- paged in blocks of {block}: {allocated}, {wasted} wasted per sequence",
    "calc.sum.paged_scales": "; the {scales} of per-layer scales in the total above are layer parameters, "
                             "outside the blocks",
    "calc.sum.longest": "- longest seq_len at batch {batch}: **{longest}**",
    "calc.sum.context_limit": " (the model's context limit)",
    "calc.sum.fits": "- this batch × seq_len fits",
    "calc.sum.no_fit": "- this batch × seq_len **does not fit**",
    "calc.sum.bounds": "- decode step ≥ {ms} ({decode_bound}), so at most {tps} tokens/s; prefill ≥ {s} s "
                       "({prefill_bound}). Lower bounds.",
    "calc.sum.note": "- note: {note}",
    "calc.sum.one_device": "**On {accel}** ({memory} GB, mem_util {util}): weights {weights}; KV budget {budget} GiB",
    "calc.sum.largest": "- largest batch at seq_len {seq_len}: **{batch}**; token slots: **{slots}**",
    "calc.sum.deployment": "**On {gpus} × {accel}** (tp {tp} × pp {pp} × dp {dp}; {memory} GB each, mem_util {util})",
    "calc.sum.per_gpu": "- per GPU: weights **{weights} GB**, KV cache **{kv} GiB** ({layers} layers × {heads}: "
                        "{per_token} bytes per token); KV budget {budget} GiB",
    "calc.sum.in_all": "- in all{replicas}: weights {weights} GB; largest batch at seq_len {seq_len}: **{batch}**; "
                       "token slots: **{slots}**{per_replica}",
    "calc.sum.replicas": " ({dp} replicas of {gpus} GPUs)",
    "calc.sum.per_replica": " ({batch} and {slots} per replica)",
    "calc.sum.mla_heads": "the whole {n}-value MLA latent",
    "calc.sum.kv_heads": "{n} of {total} KV heads",
    "calc.sum.copies": ", each on {copies} GPUs",
    "calc.bound.compute": "compute-bound",
    "calc.bound.memory": "memory-bound",
    "calc.phase.prefill": "prefill",
    "calc.phase.decode": "decode",
    # The figures (kvviz.ui.calculator.figures).
    "calc.fig.weights": "weights",
    "calc.fig.kv": "KV cache",
    "calc.fig.reserve": "runtime reserve",
    "calc.fig.state": "linear-layer state",
    "calc.fig.one_of": "one {accel} of {gpus}",
    "calc.fig.usable": "usable ({util} × memory) ",
    "calc.fig.device_memory": " device memory",
    "calc.fig.memory_title": "What fits on the device",
    "calc.fig.gib_axis": "GiB (2^30 bytes)",
    "calc.fig.batch": "batch {batch}",
    "calc.fig.batch_yours": "batch {batch} (yours)",
    "calc.fig.yours": "yours: batch {batch} × seq_len {seq_len} = {gib} GiB",
    "calc.fig.budget_one_gpu": "KV budget on one GPU",
    "calc.fig.budget_device": "KV budget on this device",
    "calc.fig.curves_title": "KV cache grows linearly with sequence length and batch",
    "calc.fig.seq_len_axis": "seq_len (tokens)",
    "calc.fig.kv_one_gpu_axis": "KV cache on one GPU (GiB)",
    "calc.fig.kv_axis": "KV cache (GiB)",
    "calc.fig.vs_mha": "{gib} GiB ({share} of MHA)",
    "calc.fig.this_model": "{attention} (this model)",
    "calc.fig.attention_title": "Same model, other attention shapes",
    "calc.fig.attention_axis": "attention",
    "calc.fig.window_applied": "window applied",
    "calc.fig.window_ignored": "window ignored (every layer keeps every token)",
    "calc.fig.span.window": "window {window}",
    "calc.fig.span.chunk": "chunk {window}",
    "calc.fig.window_title": "Sliding-window layers stop growing at the window",
    "calc.fig.chunk_title": "Chunked layers keep at most one chunk",
    "calc.fig.no_window": "no sliding-window or chunked layers: every attention layer keeps every token",
    "calc.fig.roof": "{accel} roof",
    "calc.fig.ridge": "ridge {ridge} FLOP/B",
    "calc.fig.phase_point": "{phase} ≥ {time} ({bound})",
    "calc.fig.roofline_title": "Roofline: prefill is compute-bound, decode memory-bound",
    "calc.fig.intensity_axis": "arithmetic intensity (FLOP/byte)",
    "calc.fig.flops_axis": "attainable FLOP/s",
    "calc.fig.no_roofline": "weights unknown for raw dimensions: no roofline",
    # describe / describe_layers / STATE_WHY (kvviz.calc.report).
    "calc.state_why": "a linear-attention, Mamba or convolution layer folds every token it reads into a state of "
                      "fixed size (the last few inputs of its short convolution and a recurrent matrix), so what it "
                      "keeps does not grow with seq_len: batch × layers × state, whatever the length",
    "calc.describe": "{model_type}, {shape}, {layers}",
    "calc.describe.no_attention": "no attention layer",
    "calc.describe.mla": "MLA: {heads} heads, latent {rank} + rope {rope} per token and layer",
    "calc.describe.mha": "MHA: {heads} heads, each its own K/V, head_dim {head_dim}",
    "calc.describe.shared": "{kind}: {heads} query heads share {kv_heads} KV head{s}, head_dim {head_dim}",
    "calc.layers.full": "{n} full",
    "calc.layers.sliding": "{n} sliding",
    "calc.layers.chunked": "{n} chunked",
    "calc.layers.window": ", window {window}",
    "calc.layers.chunk": ", chunk {window}",
    "calc.layers.state": "{n} keep a {kind} state",
    "calc.layers.hybrid": " ({hybrid} of them beside their KV)",
    "calc.layers.state_only": ", no per-token KV",
    "calc.layers.nothing": "{n} keep nothing (MLP-only or sharing another layer's KV)",
    "calc.layers.count": "{n} layers",
    "calc.layers.parts": "{n} layers ({parts})",
    "calc.layers.sep": "; ",
    # The text report (kvviz.calc.report.render_text), as `python -m kvviz memory` prints it.
    "report.model": "model     {name}: {describe}",
    "report.source": "source    {source}",
    "report.query": "query     batch {batch} × seq_len {seq_len}, KV {dtype}, block {block}",
    "report.format": "KV format {scheme}",
    "report.kv": "KV cache",
    "report.state": "State of the {kind} layers (per sequence, apart from the KV cache; each layer: {shapes})",
    "report.groups": "layers|count|window|tokens kept|bytes",
    "report.paged": "Paged allocation (block_size {block}, as vLLM)",
    "report.blocks": "  blocks per sequence (full layer): {blocks}; one block, all layers: {bytes}",
    "report.wasted": "  wasted in last blocks: {per_seq} per sequence, {all} in all",
    "report.weights_title": "Weights ({dtype}: {scheme})",
    "report.params": "component|params",
    "report.total": "total",
    "report.weights": "  weights: {bytes}",
    "report.active": "  a token uses {active} of them (routed experts outside its top-k and any vision or audio tower "
                     "are not run)",
    "report.deployment": "Deployment: tp {tp} × pp {pp} × dp {dp} = {gpus} GPUs ({accel})",
    "report.stages": "stage|layers|weights per GPU (GB)|KV per GPU (GB)|KV bytes per token per GPU|token slots|"
                     "largest batch",
    "report.per_gpu": "  per GPU (stage {stage}, which fills first): weights {weights}; KV cache of batch {batch} × "
                      "seq_len {seq_len}: {kv}",
    "report.in_all": "  in all: {gpus} GPUs, weights {weights} (every copy); {dp} {hold} {slots} token slots and "
                     "{batch} sequences of seq_len {seq_len} at once",
    "report.replicas_hold": "replicas hold",
    "report.replica_holds": "replica holds",
    "report.one_of": "one {accel} of {gpus}",
    "report.capacity": "Capacity on {where} ({memory} GB{measured}), mem_util {util}, reserve {reserve} GiB",
    "report.measured": ", measured",
    "report.slots": "  token slots (every layer keeps every token): {slots}",
    "report.largest": "  largest batch at seq_len {seq_len}: {batch}",
    "report.longest": "  longest seq_len at batch {batch}: {longest}",
    "report.context_limit": " (the model's context limit, not memory)",
    "report.fits": "  batch {batch} × seq_len {seq_len} fits: {answer}",
    "report.yes": "yes",
    "report.no": "NO",
    "report.roofline": "Roofline lower bounds on {accel} ({flops} {dtype}, {bandwidth}; ridge {ridge} FLOP/B)",
    "report.phases": "phase|FLOPs|bytes|FLOP/B|bound|time >=",
    "report.bound.compute": "compute",
    "report.bound.memory": "memory",
    "report.tokens_per_s": "  decode tokens/s at batch {batch} cannot exceed {tps}",
    "report.note": "note: {note}",
}

ZH = {
    "calc.intro": """
KV Cache 保存每一层的键（K）和值（V），解码下一个 token 时就不必把整段历史重算一遍。这份速度是用显存换来的：
**字节数 = batch × seq_len × layers × 2（K 和 V）× kv_heads × head_dim × bytes_per_elem**，对每一项都是线性的。
分组查询注意力（GQA）减少 `kv_heads`，滑动窗口层把 `seq_len` 截在窗口长度，
DeepSeek 的潜在注意力（MLA）每个 token 只存一个压缩向量，而不是每个头各存一份 K 和 V。
选一个预设，或填 config.json 路径或 hub id，然后拖动滑块：下面每张图都由同一个公式重新计算，公式里代入的就是你的数字。
""",
    "calc.preset": "预设（设置下面的滑块）",
    "calc.config.hosted": "或填 hub id（回车加载）",
    "calc.config.local": "或填 config.json 路径或 hub id（回车加载）",
    "calc.config.placeholder": "Qwen/Qwen2.5-0.5B-Instruct 或 /path/to/config.json",
    "calc.batch": "batch（同时处理的序列数）",
    "calc.seq_len": "seq_len（每条序列的 token 数）",
    "calc.layers": "层数（layers）",
    "calc.kv_heads": "kv_heads（须整除查询头数）",
    "calc.head_dim": "head_dim（每个头的维度）",
    "calc.kv_dtype": "KV 数据类型（dtype）",
    "calc.accelerator": "加速器",
    "calc.cpu": "本机 CPU（实测）",
    "calc.mem_util": "显存利用率（mem_util）",
    "calc.block_size": "块大小（分页分配）",
    "calc.gpus_note": "**多 GPU**：张量并行（tp）把每一层切到 tp 块 GPU 上，流水线并行（pp）把各层分成 pp 段，"
                      "数据并行（dp）复制整套部署；多于一块 GPU 时，显存图和 KV 曲线显示的是单块 GPU",
    "calc.formulas_title": "公式（代入你的数字）",
    "calc.formulas": "公式",
    "calc.json_title": "完整结果的 JSON（即 `python -m kvviz memory --json` 的输出）",
    "calc.json": "报告",
    "calc.sum.model": "**{name}** — {describe}",
    "calc.sum.modified": "{name}（已修改：{what}）",
    "calc.sum.kv": "### KV Cache：{gib} GiB = {gb} GB",
    "calc.sum.query": "batch {batch} × seq_len {seq_len}，{dtype}；所有层合计每 token {per_token} 字节",
    "calc.sum.no_window": "- 忽略滑动窗口的推理引擎会分配 {bytes}",
    "calc.sum.mla_expanded": "- 按头展开 K/V（朴素实现）需要 {bytes}",
    "calc.sum.state": "- **另有 {layers} 层的 {kind} 状态：{bytes}**（整个 batch；每条序列 {per_seq}；每层 {shapes}），"
                      "与 seq_len 无关：{why}",
    "calc.sum.paged": "- 按每块 {block} 个 token 分页：{allocated}，每条序列浪费 {wasted}",
    "calc.sum.paged_scales": "；上面总数里每层的缩放因子共 {scales}，属于层的参数，不在块里",
    "calc.sum.longest": "- batch {batch} 时最长 seq_len：**{longest}**",
    "calc.sum.context_limit": "（模型的上下文上限）",
    "calc.sum.fits": "- 这个 batch × seq_len 放得下",
    "calc.sum.no_fit": "- 这个 batch × seq_len **放不下**",
    "calc.sum.bounds": "- 解码（decode）每步 ≥ {ms}（{decode_bound}），所以最多 {tps} tokens/s；"
                       "预填充（prefill）≥ {s} s（{prefill_bound}）。以上均为下界。",
    "calc.sum.note": "- 注意：{note}",
    "calc.sum.one_device": "**在 {accel} 上**（{memory} GB，mem_util {util}）：权重 {weights}；KV 预算 {budget} GiB",
    "calc.sum.largest": "- seq_len {seq_len} 时最大 batch：**{batch}**；token 槽位：**{slots}**",
    "calc.sum.deployment": "**在 {gpus} × {accel} 上**（tp {tp} × pp {pp} × dp {dp}；每块 {memory} GB，"
                           "mem_util {util}）",
    "calc.sum.per_gpu": "- 每块 GPU：权重 **{weights} GB**，KV Cache **{kv} GiB**（{layers} 层 × {heads}："
                        "每 token {per_token} 字节）；KV 预算 {budget} GiB",
    "calc.sum.in_all": "- 合计{replicas}：权重 {weights} GB；seq_len {seq_len} 时最大 batch：**{batch}**；"
                       "token 槽位：**{slots}**{per_replica}",
    "calc.sum.replicas": "（{dp} 个副本，每个 {gpus} 块 GPU）",
    "calc.sum.per_replica": "（每个副本 {batch} 和 {slots}）",
    "calc.sum.mla_heads": "完整的 {n} 维 MLA 潜在向量",
    "calc.sum.kv_heads": "{total} 个 KV 头中的 {n} 个",
    "calc.sum.copies": "，每个头在 {copies} 块 GPU 上各存一份",
    "calc.bound.compute": "受算力限制",
    "calc.bound.memory": "受带宽限制",
    "calc.phase.prefill": "预填充",
    "calc.phase.decode": "解码",
    "calc.fig.weights": "权重",
    "calc.fig.kv": "KV Cache",
    "calc.fig.reserve": "运行时预留",
    "calc.fig.state": "线性层状态",
    "calc.fig.one_of": "{gpus} 块 {accel} 中的一块",
    "calc.fig.usable": "可用（{util} × 显存） ",
    "calc.fig.device_memory": " 设备显存",
    "calc.fig.memory_title": "设备上放得下什么",
    "calc.fig.gib_axis": "GiB（2^30 字节）",
    "calc.fig.batch": "batch {batch}",
    "calc.fig.batch_yours": "batch {batch}（你的设置）",
    "calc.fig.yours": "你的设置：batch {batch} × seq_len {seq_len} = {gib} GiB",
    "calc.fig.budget_one_gpu": "单块 GPU 的 KV 预算",
    "calc.fig.budget_device": "本设备的 KV 预算",
    "calc.fig.curves_title": "KV Cache 随序列长度和 batch 线性增长",
    "calc.fig.seq_len_axis": "seq_len（token 数）",
    "calc.fig.kv_one_gpu_axis": "单块 GPU 上的 KV Cache（GiB）",
    "calc.fig.kv_axis": "KV Cache（GiB）",
    "calc.fig.vs_mha": "{gib} GiB（MHA 的 {share}）",
    "calc.fig.this_model": "{attention}（本模型）",
    "calc.fig.attention_title": "同一模型，换用其他注意力结构",
    "calc.fig.attention_axis": "注意力结构",
    "calc.fig.window_applied": "应用滑动窗口",
    "calc.fig.window_ignored": "忽略滑动窗口（每层保留所有 token）",
    "calc.fig.span.window": "窗口 {window}",
    "calc.fig.span.chunk": "分块 {window}",
    "calc.fig.window_title": "滑动窗口层长到窗口大小就不再增长",
    "calc.fig.chunk_title": "分块层最多保留一个块",
    "calc.fig.no_window": "没有滑动窗口层或分块层：每个注意力层都保留全部 token",
    "calc.fig.roof": "{accel} 屋顶",
    "calc.fig.ridge": "拐点 {ridge} FLOP/B",
    "calc.fig.phase_point": "{phase} ≥ {time}（{bound}）",
    "calc.fig.roofline_title": "屋顶线模型（roofline）：预填充受算力限制，解码受带宽限制",
    "calc.fig.intensity_axis": "算术强度（FLOP/字节）",
    "calc.fig.flops_axis": "可达 FLOP/s",
    "calc.fig.no_roofline": "只给了维度，权重未知：无法画屋顶线",
    "calc.state_why": "线性注意力、Mamba 或卷积层把读到的每个 token 都折叠进一个固定大小的状态（短卷积最近的"
                      "几个输入和一个循环矩阵），所以它保存的内容不随 seq_len 增长：无论多长，都是 batch × 层数 × 状态",
    "calc.describe": "{model_type}，{shape}，{layers}",
    "calc.describe.no_attention": "没有注意力层",
    "calc.describe.mla": "MLA：{heads} 个头，每 token 每层存 latent {rank} + rope {rope}",
    "calc.describe.mha": "MHA：{heads} 个头，各有自己的 K/V，head_dim {head_dim}",
    "calc.describe.shared": "{kind}：{heads} 个查询头共享 {kv_heads} 个 KV 头，head_dim {head_dim}",
    "calc.layers.full": "{n} 层全注意力",
    "calc.layers.sliding": "{n} 层滑动窗口",
    "calc.layers.chunked": "{n} 层分块",
    "calc.layers.window": "，窗口 {window}",
    "calc.layers.chunk": "，分块 {window}",
    "calc.layers.state": "{n} 层保留 {kind} 状态",
    "calc.layers.hybrid": "（其中 {hybrid} 层同时保留 KV）",
    "calc.layers.state_only": "，没有逐 token 的 KV",
    "calc.layers.nothing": "{n} 层什么都不存（只有 MLP，或共享其他层的 KV）",
    "calc.layers.count": "{n} 层",
    "calc.layers.parts": "{n} 层（{parts}）",
    "calc.layers.sep": "；",
    "report.model": "模型      {name}：{describe}",
    "report.source": "来源      {source}",
    "report.query": "查询      batch {batch} × seq_len {seq_len}，KV {dtype}，块 {block}",
    "report.format": "KV 格式   {scheme}",
    "report.kv": "KV Cache",
    "report.state": "{kind} 层的状态（每条序列，KV Cache 之外；每层：{shapes}）",
    "report.groups": "层类型|层数|窗口|保留的 token|字节",
    "report.paged": "分页分配（block_size {block}，同 vLLM）",
    "report.blocks": "  每条序列的块数（全注意力层）：{blocks}；一个块（所有层）：{bytes}",
    "report.wasted": "  最后一块中浪费：每条序列 {per_seq}，合计 {all}",
    "report.weights_title": "权重（{dtype}：{scheme}）",
    "report.params": "组件|参数量",
    "report.total": "合计",
    "report.weights": "  权重：{bytes}",
    "report.active": "  每个 token 只用到其中 {active}（top-k 之外的路由专家和视觉、音频塔都不运行）",
    "report.deployment": "部署：tp {tp} × pp {pp} × dp {dp} = {gpus} 块 GPU（{accel}）",
    "report.stages": "段|层|每块 GPU 的权重 (GB)|每块 GPU 的 KV (GB)|每块 GPU 每 token 的 KV 字节|token 槽位|"
                     "最大 batch",
    "report.per_gpu": "  每块 GPU（第 {stage} 段，最先占满）：权重 {weights}；batch {batch} × seq_len {seq_len} 的 "
                      "KV Cache：{kv}",
    "report.in_all": "  合计：{gpus} 块 GPU，权重 {weights}（每份副本都算）；{dp} 个副本{hold} {slots} 个 token 槽位，"
                     "可同时容纳 {batch} 条 seq_len {seq_len} 的序列",
    "report.replicas_hold": "共有",
    "report.replica_holds": "有",
    "report.one_of": "{gpus} 块 {accel} 中的一块",
    "report.capacity": "{where} 上的容量（{memory} GB{measured}），mem_util {util}，预留 {reserve} GiB",
    "report.measured": "，实测",
    "report.slots": "  token 槽位（每层都保留每个 token）：{slots}",
    "report.largest": "  seq_len {seq_len} 时最大 batch：{batch}",
    "report.longest": "  batch {batch} 时最长 seq_len：{longest}",
    "report.context_limit": "（受模型上下文上限而非显存限制）",
    "report.fits": "  batch {batch} × seq_len {seq_len} 放得下：{answer}",
    "report.yes": "是",
    "report.no": "否",
    "report.roofline": "{accel} 上的屋顶线（roofline）下界（{flops} {dtype}，{bandwidth}；拐点 {ridge} FLOP/B）",
    "report.phases": "阶段|FLOPs|字节|FLOP/B|瓶颈|时间 >=",
    "report.bound.compute": "算力",
    "report.bound.memory": "带宽",
    "report.tokens_per_s": "  batch {batch} 时解码 tokens/s 不会超过 {tps}",
    "report.note": "注意：{note}",
}
register(EN, ZH)

# The memory model's English, matched whole (memory_text): formula labels and report notes (its refusals are
# keyed errors, kvviz/i18n/errors.py).
TEMPLATES: list[tuple[str, str]] = [
    # Formula labels (kvviz.calc.memory, capacity, parallel, params, roofline).
    ("KV cache", "KV Cache"),
    ("KV cache (window applied)", "KV Cache（应用滑动窗口）"),
    ("KV cache (window applied), {kv} of {n} layers keep per-token KV",
     "KV Cache（应用滑动窗口），{n} 层中有 {kv} 层保留逐 token 的 KV"),
    ("KV cache, {kv} of {n} layers keep per-token KV", "KV Cache，{n} 层中有 {kv} 层保留逐 token 的 KV"),
    ("KV cache, MLA latent (what vLLM, SGLang and transformers >= 5.15 keep)",
     "KV Cache，MLA 潜在向量（vLLM、SGLang 和 transformers >= 5.15 保存的形式）"),
    ("KV cache, MLA expanded per-head K/V (a naive implementation; transformers before 5.15 kept this)",
     "KV Cache，MLA 按头展开的 K/V（朴素实现；transformers 5.15 之前如此保存）"),
    ("KV cache if the engine ignores the sliding window (allocates every token)",
     "推理引擎忽略滑动窗口时的 KV Cache（为每个 token 分配）"),
    ("KV bytes per token (all layers, one sequence)", "每 token 的 KV 字节数（所有层，一条序列）"),
    ("KV bytes per token on one GPU (stage {stage}: {layers} layers)",
     "单块 GPU 上每 token 的 KV 字节数（第 {stage} 段：{layers} 层）"),
    ("{kind} state (fixed per sequence, does not grow with seq_len)", "{kind} 状态（每条序列固定，不随 seq_len 增长）"),
    ("Paged KV cache (each layer's tokens rounded up to whole blocks)", "分页 KV Cache（每层的 token 向上取整到整块）"),
    ("KV budget", "KV 预算"),
    ("KV budget on one GPU", "单块 GPU 的 KV 预算"),
    ("Parameters", "参数量"),
    ("prefill FLOPs", "预填充 FLOPs"),
    ("prefill bytes", "预填充字节数"),
    ("decode FLOPs per step", "解码每步 FLOPs"),
    ("decode bytes per step", "解码每步字节数"),
    ("prefill time (lower bound)", "预填充时间（下界）"),
    ("decode time (lower bound)", "解码每步时间（下界）"),
    ("KV heads on one GPU", "单块 GPU 上的 KV 头数"),
    ("MLA latent on one GPU (whole on every tensor-parallel GPU)",
     "单块 GPU 上的 MLA 潜在向量（每块张量并行 GPU 都存完整一份）"),
    ("GPUs in all", "GPU 总数"),
    ("Layers on one GPU (the largest pipeline stage)", "单块 GPU 上的层数（最大的流水线段）"),
    # Notes of the memory report (kvviz.calc.report) and of a config (kvviz.calc.arch).
    ("weights unknown (KV dimensions only): capacity counts the KV cache alone",
     "权重未知（只有 KV 维度）：容量只计算 KV Cache"),
    ("seq_len {seq_len} is beyond the model's context of {context} tokens",
     "seq_len {seq_len} 超出了模型 {context} 个 token 的上下文"),
    ("weights ({weights} GB) and reserve leave no room for a KV cache in {usable} GB usable on one {accel}: shard "
     "the model over several devices (tp, pp) or quantise the weights",
     "权重（{weights} GB）加上预留之后，一块 {accel} 上可用的 {usable} GB 已经放不下 KV Cache：把模型切到多个设备上"
     "（tp、pp），或量化权重"),
    ("one GPU's weights ({weights} GB at tp {tp} × pp {pp}) and reserve leave no room for a KV cache in {usable} GB "
     "usable on one {accel}: raise tp or pp, or quantise the weights",
     "单块 GPU 的权重（tp {tp} × pp {pp} 时 {weights} GB）加上预留之后，一块 {accel} 上可用的 {usable} GB 已经放不下 "
     "KV Cache：增大 tp 或 pp，或量化权重"),
    ("the roofline bounds are for the whole model on one {accel}; they do not model tensor or pipeline parallelism",
     "屋顶线下界按整个模型放在一块 {accel} 上计算，没有模拟张量并行或流水线并行"),
    ("taken from transformers' {cls} defaults (the config leaves them out): {values}",
     "取自 transformers 的 {cls} 默认值（config 中没有给出）：{values}"),
    # The CPU measured as an accelerator (kvviz.calc.hardware.measure_device): its name and how it was measured.
    ("this CPU, {n} cores", "本机 CPU（{n} 核）"),
    ("published figure", "公开数据"),
    ("165 TFLOP/s is the fp32-accumulate figure", "165 TFLOP/s 是 fp32 累加时的数字"),
    ("about 70 TFLOP/s; the AWS g5 part", "约 70 TFLOP/s；AWS g5 实例所用的型号"),
    ("no bf16: fp16 tensor cores, 65 TFLOP/s", "不支持 bf16：fp16 张量核心，65 TFLOP/s"),
    ("measured now with {threads} torch threads: {dtype} matvec over {mib} MiB and a {n}x{m} matmul, best of {k}",
     "刚刚实测（{threads} 个 torch 线程）：{dtype} 矩阵向量乘 {mib} MiB、{n}x{m} 矩阵乘，取 {k} 次中最快的一次"),
    ("measured now with {dtype} matvec over {mib} MiB and a {n}x{m} matmul, best of {k}",
     "刚刚实测：{dtype} 矩阵向量乘 {mib} MiB、{n}x{m} 矩阵乘，取 {k} 次中最快的一次"),
]
# The number formats' schemes (kvviz.calc.dtypes), as the text report names them.
_GROUPWISE_KV = ("group-wise asymmetric quantisation along each head vector, groups of 64 values, one fp16 scale "
                 "and one fp16 zero-point per group (4 bytes per 64 values), as transformers' QuantizedCache "
                 "does; its full-precision window of recent tokens is not counted")
_GROUPWISE_KV_ZH = ("沿每个头向量分组的非对称量化，每组 64 个值，每组一个 fp16 缩放因子和一个 fp16 零点（每 64 个值 4 "
                    "字节），与 transformers 的 QuantizedCache 相同；其最近 token 的全精度窗口不计入")
_GROUPWISE_W = ("group-wise quantisation of every weight matrix, groups of 128 values along the input dimension, "
                "one fp16 scale and one fp16 zero-point per group (GPTQ/AWQ-style layout); vectors (norms, biases) "
                "stay in bf16")
_GROUPWISE_W_ZH = ("每个权重矩阵分组量化，沿输入维度每组 128 个值，每组一个 fp16 缩放因子和一个 fp16 零点（GPTQ/AWQ 式"
                   "布局）；向量（归一化、偏置）保持 bf16")
TEMPLATES += [
    ("{fmt}, no scales", "{fmt}，无缩放因子"),
    ("float8 e4m3 with one fp32 scale for K and one for V per layer (vLLM's per-tensor kv scales, 8 bytes per layer)",
     "float8 e4m3，每层 K 和 V 各一个 fp32 缩放因子（vLLM 的逐张量 kv 缩放，每层 8 字节）"),
    ("float8 e4m3, per-tensor scales (negligible, not counted); vectors stay in bf16",
     "float8 e4m3，逐张量缩放因子（可忽略，不计入）；向量保持 bf16"),
    ("{fmt}, " + _GROUPWISE_KV, "{fmt}，" + _GROUPWISE_KV_ZH),
    ("{fmt}, " + _GROUPWISE_W, "{fmt}，" + _GROUPWISE_W_ZH),
]


@cache
def _pattern(template: str) -> re.Pattern:
    """The template as a regular expression: its text literal, each {field} a named group matching any text."""
    parts = re.split(r"\{(\w+)\}", template)
    regex = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+?)" for i, p in enumerate(parts))
    return re.compile(f"{regex}$", re.DOTALL)


def memory_text(text: str, lang: object) -> str:
    """A label or note of the memory model in `lang`: as it is in English (or when no template knows it), else
    the Chinese of the first template that matches it whole, with the values it carried."""
    if normalize(lang) == "en":
        return text
    for en, zh in TEMPLATES:
        found = _pattern(en).match(text)
        if found:
            return zh.format(**found.groupdict())
    return text

# Words inside a formula's symbolic and substituted text (its identifiers stay), and the units of its result.
FORMULA_PHRASES = {
    "weights read once + KV cache written": "权重读一次 + 写入的 KV Cache",
    "weights read + KV cache read + new token's K/V written": "读权重 + 读 KV Cache + 写入新 token 的 K/V",
    "0 (no layer keeps per-token KV)": "0（没有层保留逐 token 的 KV）",
    "(layer-blocks per sequence)": "（每条序列的层块数）",
}
UNITS = {
    "bytes": "字节",
    "GPUs": "块 GPU",
    "KV heads": "个 KV 头",
    "values per token and layer": "个值（每 token 每层）",
    "layers": "层",
    "params": "个参数",
}
# Parameter components (kvviz.calc.params) as the text report's table names them.
COMPONENTS = {
    "embedding": "嵌入",
    "position embedding": "位置嵌入",
    "attention": "注意力",
    "state mixer": "状态混合层",
    "dense MLP": "稠密 MLP",
    "routed experts": "路由专家",
    "shared experts": "共享专家",
    "router": "路由器",
    "norms": "归一化层",
    "other": "其他",
    "vision/audio tower": "视觉/音频塔",
    "lm_head": "lm_head",
}
