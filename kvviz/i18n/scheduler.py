"""The Scheduler tab's texts (kvviz/ui/scheduler): its intro, the presets and what to watch in each, the player's
step line and controls, and the comparison with the local vLLM."""

from __future__ import annotations

from kvviz.i18n import register

EN = {
    "tab.scheduler": "Scheduler",
    "scheduler.intro": (
        "### vLLM's scheduler, step by step\n"
        "A simulated run of vLLM V1's scheduler (kvviz's simulator, checked step by step against vLLM's own "
        "scheduler class), played here in your browser: one row per request with its phase in every step, the "
        "tokens each step computes against the token budget, and the KV blocks each running request holds. Pick a "
        "preset, press Play, or step through it. Step times are this machine's vLLM, calibrated."),
    "scheduler.preset": "Preset",
    "scheduler.preset.fill": "the batch filling up",
    "scheduler.preset.chunk": "a long prompt chunked among decodes",
    "scheduler.preset.preempt": "the cache full: a request preempted",
    "scheduler.preset.prefix": "a shared-prefix hit",
    "scheduler.preset.window": "a sliding window freeing blocks behind it",
    "scheduler.requests": "Requests",
    "scheduler.simulate": "Simulate",
    "scheduler.explain.fill": (
        "**The batch filling up.** Twelve requests of 96 prompt and 24 output tokens arrive one every 1/6 s; the "
        "engine runs at most 4 at once (max_num_seqs 4). Watch the rows: each newcomer is prefilled in its first "
        "step (blue), then decodes one token a step (green). The batch grows by one every two or three steps until "
        "four run; from then on each newcomer waits (yellow) until one finishes and frees its seat, so waiting, not "
        "computing, becomes most of its time to first token. The token bars stay far below the budget line: the "
        "seat limit holds them back, not the budget."),
    "scheduler.explain.chunk": (
        "**A long prompt chunked among decodes.** A 640-token prompt arrives every second and a step computes "
        "at most 256 tokens (max_num_batched_tokens). The scheduler serves the running requests first, one token "
        "each for those decoding, and gives what is left of the budget to the new prompt: it is prefilled in three "
        "chunks over three steps (blue in its row) while the others keep decoding in the same steps. Watch the "
        "token bars touch the budget line during a prefill, and the step times in the line grow then: chunked "
        "prefill spreads the prompt's cost over everyone's steps instead of stalling them for one long step."),
    "scheduler.explain.preempt": (
        "**The cache full: a request preempted.** Four requests of 64 prompt and 96 output tokens share 16 KV "
        "blocks of 32 tokens. Admitted together, each holds 2 blocks, and one more for every 32 tokens it adds. "
        "At step 64 they hold all 16. At step 65 r0 needs a fifth block and none is free, so the scheduler "
        "preempts the last admitted, r3: its 4 blocks are freed and its work is thrown away (red, then yellow "
        "while it waits). The three others finish at step 95; at step 96 r3 is admitted again, finds its first "
        "block still in the prefix cache (the dashed cell marked c) and recomputes the other 97 tokens in one "
        "step. Step to 65 and look at the blocks."),
    "scheduler.explain.prefix": (
        "**A shared-prefix hit.** Six requests arrive every half second; every prompt opens with the same 256 "
        "tokens (8 blocks of 32), then 64 of its own. r0 computes all 320. Each later one finds the 8 shared blocks "
        "in the prefix cache and computes only its own 64: the line says \"hit r1 256\" in its first step, and "
        "its prefill bar is a fifth of r0's. Blocks several requests hold at once are outlined and marked ×n; when "
        "nobody holds them they stay cached (dashed) for the next request."),
    "scheduler.explain.window": (
        "**A sliding window freeing blocks behind it.** The load of the preemption preset (four requests of 64 "
        "prompt and 96 output tokens, 16 KV blocks of 32 tokens), on a model whose every layer attends over the "
        "last 64 tokens only (a sliding window, as Mistral 7B v0.1's layers attend over the last 4,096). Before "
        "each step a request frees the blocks wholly behind its window: from its first decode on it holds 3 blocks "
        "(2 for one step in 32) however long it grows, so the four hold 12 of the 16 and nobody is preempted. All "
        "four end in 96 steps, where with full attention r3 is preempted at step 65 and the run takes 127. Watch "
        "the blocks: as a row takes a new block its oldest goes back to the free ones. A real run sends the same "
        "load to the model the Serving tab runs, whose layers attend over everything."),
    "scheduler.setup": ("{requests} requests of {prompt} prompt + {output} output tokens{prefix}, {arrivals}; "
                        "{blocks} KV blocks of {block_size} tokens, a budget of {budget} tokens per step, at most "
                        "{seqs} running. {steps} steps, {seconds:.2f} s simulated, {preemptions} preemption(s). "
                        "Step times: {calibration}."),
    "scheduler.setup.prefix": " ({prefix} shared)",
    "scheduler.setup.closed": "all sent at once (a closed loop of {n})",
    "scheduler.setup.rate": "one every {gap:.3g} s",
    "scheduler.setup.stopped": "The run was cut short: {why}.",
    "scheduler.none": "none",
    "scheduler.sep": ", ",
    "scheduler.line.head": "step {step} ({t:.2f} s): ",
    "scheduler.line.running": "running {names}",
    "scheduler.line.waiting": "waiting {names}",
    "scheduler.line.budget": "budget {used}/{budget}",
    "scheduler.line.kv": "KV {used}/{blocks} blocks",
    "scheduler.line.preempted": "preempted {names}",
    "scheduler.line.hits": "hit {hits}",
    "scheduler.line.finished": "finished {names}",
    "scheduler.line.blocks": "blocks held: {each} · free {free}, of them still cached {cached}",
    "scheduler.ui.play": "Play",
    "scheduler.ui.pause": "Pause",
    "scheduler.ui.prev": "Step back",
    "scheduler.ui.next": "Step",
    "scheduler.ui.speed": "steps/s",
    "scheduler.ui.step": "step",
    "scheduler.ui.requests": "requests by phase, step by step",
    "scheduler.ui.tokens": "tokens per step",
    "scheduler.ui.budget": "budget",
    "scheduler.ui.blocks": "KV blocks",
    "scheduler.ui.free": "free block",
    "scheduler.ui.cached": "free, still cached",
    "scheduler.ui.shared": "shared block",
    "scheduler.ui.phase._": "not arrived",
    "scheduler.ui.phase.w": "waiting",
    "scheduler.ui.phase.x": "preempted",
    "scheduler.ui.phase.p": "prefill (chunk)",
    "scheduler.ui.phase.d": "decode",
    "scheduler.ui.phase.r": "running, not scheduled",
    "scheduler.ui.phase.f": "finished",
    "scheduler.real.box": "The same load on the local vLLM",
    "scheduler.real.intro": (
        "Runs this preset's load (the same requests, lengths and arrivals) on the local vLLM that the Serving tab "
        "starts, reading its /metrics four times a second, and simulates the same load on that server's own "
        "scheduler settings (its KV blocks and block size, a budget of 2048 tokens, 128 sequences: vLLM's defaults "
        "on a CPU) with this machine's calibrated step times. Its running and waiting counts and KV usage are drawn "
        "over the simulator's. The server's pool is usually far larger than the preset's, so a preset's "
        "preemption may not happen there; the simulator, given the same pool, says whether it should."),
    "scheduler.real.run": "Run on the local vLLM",
    "scheduler.real.result": (
        "**{requests} requests on vLLM** ({model}, {blocks} KV blocks of {block_size} tokens): the load took "
        "{real:.2f} s, the simulator says {sim:.2f} s. Peak running {real_running} on vLLM, {sim_running} "
        "simulated; peak waiting {real_waiting} and {sim_waiting}; peak KV usage {real_kv} and "
        "{sim_kv}; preemptions {real_pre} and {sim_pre}. vLLM's gauges are read every 0.25 s, so a count that "
        "lasted one step (about {step_ms:.0f} ms here) may fall between two readings. Step times: {calibration}; "
        "this machine's load average was {load:g} when the load ended (other work slows vLLM, not the simulator)."),
    "scheduler.real.unknown": "unknown",
    "scheduler.real.calibration": "{model}, calibrated on {device}",
    "scheduler.refuse.no_engine": "start the local vLLM first (Serving tab: Start vLLM), then run this again",
    "scheduler.refuse.ranks": "the comparison runs on a vLLM of one rank; this one has {n}",
    "scheduler.refuse.no_cache": "the server's /metrics did not say its KV blocks (vllm:cache_config_info)",
    "scheduler.refuse.failed": "the load failed: {why}",
    "scheduler.fig.title": "The same load: vLLM's /metrics against the simulator",
    "scheduler.fig.x": "seconds since the load's start",
    "scheduler.fig.vllm": "vLLM (/metrics)",
    "scheduler.fig.sim": "simulator",
    "scheduler.fig.running": "running",
    "scheduler.fig.waiting": "waiting",
    "scheduler.fig.kv_usage": "KV usage (%)",
    "scheduler.fig.none": "Run the load on the local vLLM to see its series here",
}

ZH = {
    "tab.scheduler": "调度器（Scheduler）",
    "scheduler.intro": (
        "### vLLM 调度器，一步一步看\n"
        "vLLM V1 调度器的一次模拟运行（kvviz 的模拟器，已逐步对照 vLLM 自己的调度器类验证），在浏览器里逐步播放："
        "每个请求一行，显示它在每一步的阶段；每一步计算的 token 数与 token 预算对比；每个运行中请求"
        "占用的 KV 块。选一个预设，"
        "按“播放”，或逐步前进。步长时间来自本机 vLLM 的标定。"),
    "scheduler.preset": "预设",
    "scheduler.preset.fill": "批次逐渐填满",
    "scheduler.preset.chunk": "长提示词在解码之间分块预填充",
    "scheduler.preset.preempt": "KV Cache 满了：一个请求被抢占",
    "scheduler.preset.prefix": "共享前缀命中",
    "scheduler.preset.window": "滑动窗口释放窗口之外的块",
    "scheduler.requests": "请求数",
    "scheduler.simulate": "模拟",
    "scheduler.explain.fill": (
        "**批次逐渐填满。** 12 个请求（提示词 96 token，输出 24 token）每 1/6 秒到达一个；引擎最多同时运行 4 个"
        "（max_num_seqs 4）。看各行：每个新请求在第一步被预填充（蓝色），之后每步解码一个 token（绿色）。批次每两三步"
        "增加一个，直到 4 个同时运行；此后每个新请求都要等待（黄色），直到有请求完成、空出位置。于是首 token 延迟的"
        "大部分是等待，而不是计算。token 柱远低于预算线：限制它们的是并发席位，不是预算。"),
    "scheduler.explain.chunk": (
        "**长提示词在解码之间分块预填充。** 每秒到达一个 640 token 的提示词，每步最多计算 256 token"
        "（max_num_batched_tokens）。调度器先服务正在运行的请求，解码中的每个请求一个 token，再把剩"
        "下的预算给新提示词："
        "它分三块、用三步预填充完（它那一行的蓝色），其他请求在同样的步里继续解码。注意预填充时 token 柱碰到预算线，"
        "状态行里的步长时间也随之变长：分块预填充把提示词的代价分摊到大家的各步里，而不是让所有人停等一个很长的步。"),
    "scheduler.explain.preempt": (
        "**KV Cache 满了：一个请求被抢占。** 4 个请求（提示词 64 token，输出 96 token）共用 16 个 32 token 的 KV 块。"
        "它们一起被接纳，各占 2 块，每多 32 个 token 再占一块。第 64 步时 16 块全部用完。第 65 步 r0 需要第五块，"
        "没有空闲块，调度器便抢占最后被接纳的 r3：释放它的 4 块，丢弃它已算的结果（先红色，等待时黄色）。其余三个在"
        "第 95 步完成；第 96 步 r3 重新被接纳，发现它的第一块仍在前缀缓存里（标 c 的虚线格），一步重算其余 97 个 "
        "token。前进到第 65 步，看看 KV 块。"),
    "scheduler.explain.prefix": (
        "**共享前缀命中。** 6 个请求每半秒到达一个；每个提示词都以同样的 256 token（8 个 32 token 的块）开头，"
        "后面是自己的 64 token。r0 计算全部 320 个。之后的每个请求都在前缀缓存里找到这 8 个共享块，只计算自己的 "
        "64 个：它第一步的状态行写着“命中 r1 256”，它的预填充柱只有 r0 的五分之一。被多个请求同时持有的块加了黑框、"
        "标着 ×n；没有请求持有时它们仍留在缓存里（虚线），等下一个请求。"),
    "scheduler.explain.window": (
        "**滑动窗口释放窗口之外的块。** 与抢占预设相同的负载（4 个请求，各 64 个提示词 token、96 个输出 token，"
        "16 个 32 token 的 KV 块），但模型的每一层只关注最近的 64 个 token（滑动窗口，如 Mistral 7B v0.1 的各层"
        "只关注最近 4,096 个）。每一步之前，请求释放完全落在窗口之外的块：从第一次解码起，无论序列多长，它只占 3 "
        "个块（每 32 步中有一步是 2 个），4 个请求合计占 16 块中的 12 块，没有请求被抢占。4 个请求在 96 步内全部"
        "完成；若是全注意力，r3 会在第 65 步被抢占，整个运行需要 127 步。请看块视图：某一行每拿到一个新块，它最旧"
        "的块就回到空闲块中。真实运行会把同样的负载发给「服务」标签页正在运行的模型，那个模型的各层关注全部 token。"),
    "scheduler.setup": ("{requests} 个请求，提示词 {prompt} + 输出 {output} token{prefix}，{arrivals}；"
                        "{blocks} 个 {block_size} token 的 KV 块，每步预算 {budget} token，最多同时运行 {seqs} 个。"
                        "共 {steps} 步，模拟 {seconds:.2f} 秒，抢占 {preemptions} 次。步长时间：{calibration}。"),
    "scheduler.setup.prefix": "（其中 {prefix} 共享）",
    "scheduler.setup.closed": "同时发出（并发 {n} 的闭环）",
    "scheduler.setup.rate": "每 {gap:.3g} 秒一个",
    "scheduler.setup.stopped": "运行被提前截断：{why}。",
    "scheduler.none": "无",
    "scheduler.sep": "，",
    "scheduler.line.head": "第 {step} 步（{t:.2f} 秒）：",
    "scheduler.line.running": "运行 {names}",
    "scheduler.line.waiting": "等待 {names}",
    "scheduler.line.budget": "预算 {used}/{budget}",
    "scheduler.line.kv": "KV {used}/{blocks} 块",
    "scheduler.line.preempted": "被抢占 {names}",
    "scheduler.line.hits": "命中 {hits}",
    "scheduler.line.finished": "完成 {names}",
    "scheduler.line.blocks": "占用的块：{each} · 空闲 {free} 块，其中仍在缓存中 {cached} 块",
    "scheduler.ui.play": "播放",
    "scheduler.ui.pause": "暂停",
    "scheduler.ui.prev": "后退一步",
    "scheduler.ui.next": "前进一步",
    "scheduler.ui.speed": "步/秒",
    "scheduler.ui.step": "步",
    "scheduler.ui.requests": "各请求每一步的阶段",
    "scheduler.ui.tokens": "每步 token 数",
    "scheduler.ui.budget": "预算",
    "scheduler.ui.blocks": "KV 块",
    "scheduler.ui.free": "空闲块",
    "scheduler.ui.cached": "空闲，仍在缓存中",
    "scheduler.ui.shared": "共享块",
    "scheduler.ui.phase._": "尚未到达",
    "scheduler.ui.phase.w": "等待",
    "scheduler.ui.phase.x": "被抢占",
    "scheduler.ui.phase.p": "预填充（分块）",
    "scheduler.ui.phase.d": "解码",
    "scheduler.ui.phase.r": "运行中，本步未调度",
    "scheduler.ui.phase.f": "已完成",
    "scheduler.real.box": "同样的负载跑在本地 vLLM 上",
    "scheduler.real.intro": (
        "把这个预设的负载（同样的请求、长度和到达时间）发给服务（Serving）页启动的本地 vLLM，"
        "每秒读取四次它的 /metrics，并用该服务器自己的调度设置（它的 KV 块数和块大小、每步 2048 tok"
        "en 的预算、最多 128 个序列："
        "vLLM 在 CPU 上的默认值）和本机标定的步长时间模拟同一负载。图中把它的运行数、等待数和 KV 使"
        "用率画在模拟器的曲线上。服务器的 KV 池通常"
        "比预设的大得多，所以预设里的抢占在那里可能不会发生；给模拟器同样的池，它会告诉你是否应该发生。"),
    "scheduler.real.run": "在本地 vLLM 上运行",
    "scheduler.real.result": (
        "**vLLM 上 {requests} 个请求**（{model}，{blocks} 个 {block_size} token 的 KV 块）：负载用时 {real:.2f} 秒，"
        "模拟器预测 {sim:.2f} 秒。运行数峰值：vLLM {real_running}，模拟 {sim_running}；等待数峰"
        "值 {real_waiting} "
        "和 {sim_waiting}；KV 使用率峰值 {real_kv} 和 {sim_kv}；抢占 {real_pre} 和 {sim_pre} 次。"
        "vLLM 的指标每 0.25 秒读一次，只持续一步（这里约 {step_ms:.0f} 毫秒）的计数可能落在两次读数"
        "之间。步长时间：{calibration}；本负载结束时本机的 1 分钟平均负载为 {load:g}"
        "（其他工作会拖慢 vLLM，但不影响模拟器）。"),
    "scheduler.real.unknown": "未知",
    "scheduler.real.calibration": "{model}，在 {device} 上标定",
    "scheduler.refuse.no_engine": "请先启动本地 vLLM（服务页：启动 vLLM），再运行",
    "scheduler.refuse.ranks": "对比只在单个 rank 的 vLLM 上运行；这个有 {n} 个",
    "scheduler.refuse.no_cache": "服务器的 /metrics 没有给出 KV 块数（vllm:cache_config_info）",
    "scheduler.refuse.failed": "负载失败：{why}",
    "scheduler.fig.title": "同一负载：vLLM 的 /metrics 对比模拟器",
    "scheduler.fig.x": "负载开始后的秒数",
    "scheduler.fig.vllm": "vLLM（/metrics）",
    "scheduler.fig.sim": "模拟器",
    "scheduler.fig.running": "运行",
    "scheduler.fig.waiting": "等待",
    "scheduler.fig.kv_usage": "KV 使用率（%）",
    "scheduler.fig.none": "在本地 vLLM 上运行该负载后，这里会显示它的曲线",
}

register(EN, ZH)
