"""The Plan tab's texts (kvviz/ui/plan): its labels, status lines, answer, figures and the measured check."""

from __future__ import annotations

from kvviz.i18n import register

EN = {
    "tab.plan": "Plan",
    "plan.intro": "Plan a deployment before running it: the simulator of vLLM's scheduler (kvviz.sim) predicts how "
                  "one replica behaves under your load: throughput, TTFT and TPOT against load, the knee where "
                  "throughput stops following the load, the highest rate that meets your SLO, the replicas and "
                  "GPUs a target rate needs, and what a million output tokens cost. On a GPU preset each step's "
                  "time is a **roofline lower bound** (real steps are slower: rates are upper bounds); on **this "
                  "machine, calibrated**, it is a fit measured on the local vLLM, and one button runs the same "
                  "loads on it to show how far the prediction lands from the measurement.",
    "plan.device": "where it runs",
    "plan.device.gpu": "GPU preset (roofline lower bound)",
    "plan.device.here": "this machine, calibrated (the local vLLM)",
    "plan.model": "model (a calculator preset, or a model folder)",
    "plan.gpu": "GPU",
    "plan.tp": "tensor parallel (0: the smallest that fits)",
    "plan.pp": "pipeline parallel",
    "plan.calibration": "calibration (results/simulator, or a path)",
    "plan.kv_space": "vLLM's KV-cache space (GiB)",
    "plan.workload": "Workload",
    "plan.loop": "arrivals",
    "plan.loop.open": "open loop: Poisson arrivals at a rate",
    "plan.loop.closed": "closed loop: fixed requests in flight",
    "plan.rate": "request rate (requests/s)",
    "plan.concurrency": "requests in flight",
    "plan.prompt_tokens": "prompt tokens",
    "plan.output_tokens": "output tokens",
    "plan.prefix_tokens": "shared prefix tokens (the same in every prompt)",
    "plan.requests": "requests simulated per load",
    "plan.slo": "SLO",
    "plan.ttft": "TTFT limit (s)",
    "plan.ttft_percentile": "TTFT percentile",
    "plan.tpot": "TPOT limit (s)",
    "plan.tpot_percentile": "TPOT percentile",
    "plan.cost_box": "Target and cost",
    "plan.price": "price per GPU-hour (per machine-hour calibrated)",
    "plan.target_rate": "target rate (requests/s)",
    "plan.predict": "Predict",
    "plan.hint": "Press **Predict**: the curves, the knee and the SLO answer appear here.",
    "plan.check_box": "Run the same loads on the local vLLM (this machine, calibrated)",
    "plan.check_hint": "Start vLLM on the calibration's model in the Serving tab first. The check runs half the "
                       "load asked, the load and twice it, and draws the measured points over the lines.",
    "plan.check_requests": "requests per measured load",
    "plan.check_button": "Run on the local vLLM",
    "plan.json": "The prediction as JSON",
    "plan.status.knee": "simulating the knee (a closed loop at max_num_seqs)…",
    "plan.status.point": "simulating load {done} of {of} ({load})…",
    "plan.status.search": "searching the highest rate under the SLO…",
    "plan.status.done": "predicted in {seconds} s: {points} loads on the curve, {searched} rate(s) searched.",
    "plan.status.check_run": "measuring load {done} of {of} ({load}) on the local vLLM: {ended} request(s) "
                             "ended, {seconds} s…",
    "plan.status.check_done": "measured {loads} load(s) on the local vLLM in {seconds} s.",
    "plan.failed": "Failed: {message}",
    "plan.refuse.predict_first": "press Predict first: the check runs the loads of the last prediction",
    "plan.refuse.calibrated_only": "the local vLLM is this machine: predict with \"this machine, calibrated\" "
                                   "first (a GPU preset cannot be checked here)",
    "plan.refuse.local_first": "start vLLM on {model} in the Serving tab first (it serves: {served})",
    "plan.refuse.no_run": "the load on the local vLLM ended without a result",
    # Figures.
    "plan.fig.none": "nothing predicted yet",
    "plan.fig.x_open": "offered load (requests/s)",
    "plan.fig.x_closed": "requests in flight",
    "plan.fig.knee": "knee {rate:,.3g}/s",
    "plan.fig.slo_rate": "highest under the SLO {rate:,.3g}/s",
    "plan.fig.knee_tokens": "saturated: {tokens:,.0f} tokens/s",
    "plan.fig.predicted": "predicted",
    "plan.fig.measured": "measured (local vLLM)",
    "plan.fig.predicted_q": "{metric} {q} predicted",
    "plan.fig.measured_q": "{metric} {q} measured",
    "plan.fig.slo_limit": "SLO: {metric} p{q} ≤ {ms} ms",
    "plan.fig.tput.title": "Throughput against load",
    "plan.fig.tput.y": "output tokens/s",
    "plan.fig.ttft.title": "Time to first token against load",
    "plan.fig.tpot.title": "Time per output token against load",
    "plan.fig.ms": "{metric} (ms)",
    "plan.fig.tradeoff.title": "Tokens/s per user against total tokens/s",
    "plan.fig.tradeoff.y": "tokens/s per user (1 / TPOT p50)",
    "plan.fig.tradeoff.hover": "%{{x:,.0f}} tokens/s in all, %{{y:,.1f}} per user at %{{text}} ({unit})"
                               "<extra></extra>",
    # The answer.
    "plan.how.roofline": "simulated vLLM scheduler, each step a roofline lower bound, {model} on {gpu}"
                         " (tp {tp}, pp {pp}): predicted, not measured",
    "plan.how.calibrated": "simulated vLLM scheduler, each step a calibrated fit, {model} on {device} "
                           "(calibration {path}): predicted, not measured",
    "plan.how.short_roofline": "predicted: roofline lower bound, {model} on {gpu} (tp {tp}, pp {pp})",
    "plan.how.short_calibrated": "predicted: calibrated fit {file}, {model} on this machine",
    "plan.how.short_calibrated_elsewhere": "predicted: calibrated fit {file}, {model} on another machine",
    "plan.answer.how": "How:",
    "plan.answer.elsewhere": "**measured on another machine**: this calibration is {there}'s, not this machine's "
                             "({here}); calibrate here for this machine's answer (`python -m kvviz.sim calibrate`)",
    "plan.answer.overhead": "every predicted TTFT includes the calibration's request overhead ({ms} ms): the "
                            "client's view, as measured",
    "plan.answer.replica": "one replica: {blocks} KV blocks of {block} tokens, at most {seqs} sequences and {tokens} "
                           "tokens a step",
    "plan.answer.load_open": "{load} requests/s",
    "plan.answer.load_closed": "{load} requests in flight",
    "plan.answer.asked": "at {load}: **{tokens} output tokens/s**, TTFT p99 {ttft} ms, TPOT p99 {tpot} ms",
    "plan.answer.knee": "**knee**: throughput saturates at **{rate} requests/s** ({tokens} output tokens/s)",
    "plan.answer.none": "**no rate meets the SLO** on one replica: loosen the SLO or shorten the requests",
    "plan.answer.max_at_knee": "**highest rate under the SLO: {rate} requests/s** ({tokens} output tokens/s), the "
                               "knee itself: throughput, not the SLO, bounds the replica",
    "plan.answer.max_rate": "**highest rate under the SLO: {rate} requests/s** ({tokens} output tokens/s); "
                            "{next} requests/s breaks it",
    "plan.answer.band": "with every step {pct}% slower: {slower} requests/s; {pct}% faster: {faster} requests/s "
                        "(the same SLO: how far the answer moves if this machine runs off its calibration, as "
                        "a shared machine's speed does within minutes)",
    "plan.answer.replicas": "for **{target} requests/s**: **{replicas} replica(s)** × {per} {unit} = "
                            "**{gpus} {unit}**",
    "plan.answer.cost": "cost: **{cost} per million output tokens** with one replica at its highest rate "
                        "({price} per {hour})",
    "plan.answer.cost_target": "at the target rate: **{cost} per million output tokens** over {gpus} {unit}",
    "plan.answer.stopped": "the search stopped early: {why}",
    "plan.unit.gpus": "GPU(s)",
    "plan.unit.machines": "machine(s)",
    "plan.unit.gpu_hour": "GPU-hour",
    "plan.unit.machine_hour": "machine-hour",
    "plan.metric.tput": "output tokens/s",
    "plan.metric.ttft_p50": "TTFT p50 (ms)",
    "plan.metric.ttft_p99": "TTFT p99 (ms)",
    "plan.metric.tpot_p50": "TPOT p50 (ms)",
    "plan.metric.tpot_p99": "TPOT p99 (ms)",
    "plan.table.load": "load",
    "plan.table.metric": "metric",
    "plan.table.predicted": "predicted",
    "plan.table.measured": "measured",
    "plan.table.error": "error",
    "plan.check.done": "**Measured on the local vLLM**: {loads} load(s), {requests} requests each, each predicted "
                       "again with the same requests and arrivals. Median error: {errors}.",
    "plan.check.sep": ", ",
}

ZH = {
    "tab.plan": "规划（Plan）",
    "plan.intro": "部署之前先规划：vLLM 调度器的模拟器（kvviz.sim）预测一个副本在你的负载下的表现：吞吐、TTFT 和 "
                  "TPOT 随负载的变化，吞吐不再跟随负载的拐点（knee），满足 SLO 的最高请求速率，目标速率需要的副本数和 "
                  "GPU 数，以及每百万输出 token 的成本。在 GPU 预设上，每一步的时间是 **roofline 下界**（真实的步更慢："
                  "速率是上界）；在 **本机（已校准）** 上，它是在本地 vLLM 上测得的拟合，一个按钮会在本地 vLLM 上跑同样"
                  "的负载，显示预测与实测相差多远。",
    "plan.device": "运行在哪里",
    "plan.device.gpu": "GPU 预设（roofline 下界）",
    "plan.device.here": "本机，已校准（本地 vLLM）",
    "plan.model": "模型（计算器的预设，或模型文件夹）",
    "plan.gpu": "GPU",
    "plan.tp": "张量并行（0：放得下的最小值）",
    "plan.pp": "流水线并行",
    "plan.calibration": "校准文件（results/simulator 中的，或一个路径）",
    "plan.kv_space": "vLLM 的 KV Cache 空间（GiB）",
    "plan.workload": "负载",
    "plan.loop": "请求到达方式",
    "plan.loop.open": "开环：按速率的泊松到达",
    "plan.loop.closed": "闭环：固定的在途请求数",
    "plan.rate": "请求速率（请求/秒）",
    "plan.concurrency": "在途请求数",
    "plan.prompt_tokens": "提示 token 数",
    "plan.output_tokens": "输出 token 数",
    "plan.prefix_tokens": "共享前缀 token 数（每个提示都相同）",
    "plan.requests": "每个负载模拟的请求数",
    "plan.slo": "SLO",
    "plan.ttft": "TTFT 上限（秒）",
    "plan.ttft_percentile": "TTFT 百分位",
    "plan.tpot": "TPOT 上限（秒）",
    "plan.tpot_percentile": "TPOT 百分位",
    "plan.cost_box": "目标与成本",
    "plan.price": "每 GPU 小时的价格（校准模式下为每台机器小时）",
    "plan.target_rate": "目标速率（请求/秒）",
    "plan.predict": "预测",
    "plan.hint": "按 **预测**：曲线、拐点和 SLO 的答案会显示在这里。",
    "plan.check_box": "在本地 vLLM 上跑同样的负载（本机，已校准）",
    "plan.check_hint": "先在「服务（Serving）」页用校准文件对应的模型启动 vLLM。检查会跑所问负载的一半、该负载和两倍，"
                       "并把实测点画在预测曲线上。",
    "plan.check_requests": "每个实测负载的请求数",
    "plan.check_button": "在本地 vLLM 上运行",
    "plan.json": "预测的 JSON",
    "plan.status.knee": "正在模拟拐点（max_num_seqs 下的闭环）…",
    "plan.status.point": "正在模拟第 {done} 个负载，共 {of} 个（{load}）…",
    "plan.status.search": "正在搜索满足 SLO 的最高速率…",
    "plan.status.done": "预测用时 {seconds} 秒：曲线上 {points} 个负载，搜索了 {searched} 个速率。",
    "plan.status.check_run": "正在本地 vLLM 上测量第 {done} 个负载，共 {of} 个（{load}）：已结束 {ended} 个请求，"
                             "{seconds} 秒…",
    "plan.status.check_done": "在本地 vLLM 上测量了 {loads} 个负载，用时 {seconds} 秒。",
    "plan.failed": "失败：{message}",
    "plan.refuse.predict_first": "请先按「预测」：检查运行的是上一次预测的负载",
    "plan.refuse.calibrated_only": "本地 vLLM 就是本机：请先用「本机，已校准」做预测（GPU 预设无法在这里检查）",
    "plan.refuse.local_first": "请先在「服务（Serving）」页启动 {model} 的 vLLM（它现在服务的是：{served}）",
    "plan.refuse.no_run": "本地 vLLM 上的负载结束了，但没有结果",
    "plan.fig.none": "还没有预测",
    "plan.fig.x_open": "施加的负载（请求/秒）",
    "plan.fig.x_closed": "在途请求数",
    "plan.fig.knee": "拐点 {rate:,.3g}/秒",
    "plan.fig.slo_rate": "满足 SLO 的最高速率 {rate:,.3g}/秒",
    "plan.fig.knee_tokens": "饱和：{tokens:,.0f} token/秒",
    "plan.fig.predicted": "预测",
    "plan.fig.measured": "实测（本地 vLLM）",
    "plan.fig.predicted_q": "{metric} {q} 预测",
    "plan.fig.measured_q": "{metric} {q} 实测",
    "plan.fig.slo_limit": "SLO：{metric} p{q} ≤ {ms} 毫秒",
    "plan.fig.tput.title": "吞吐随负载的变化",
    "plan.fig.tput.y": "输出 token/秒",
    "plan.fig.ttft.title": "首 token 延迟（TTFT）随负载的变化",
    "plan.fig.tpot.title": "每 token 延迟（TPOT）随负载的变化",
    "plan.fig.ms": "{metric}（毫秒）",
    "plan.fig.tradeoff.title": "每用户 token/秒 与总 token/秒",
    "plan.fig.tradeoff.y": "每用户 token/秒（1 / TPOT p50）",
    "plan.fig.tradeoff.hover": "总计 %{{x:,.0f}} token/秒，每用户 %{{y:,.1f}}，负载 %{{text}}（{unit}）"
                               "<extra></extra>",
    "plan.how.roofline": "模拟的 vLLM 调度器，每一步取 roofline 下界，{model} 在 {gpu} 上（tp {tp}，pp {pp}）："
                         "是预测，不是实测",
    "plan.how.calibrated": "模拟的 vLLM 调度器，每一步取校准拟合，{model} 在 {device} 上（校准文件 {path}）："
                           "是预测，不是实测",
    "plan.how.short_roofline": "预测：roofline 下界，{model} 在 {gpu} 上（tp {tp}，pp {pp}）",
    "plan.how.short_calibrated": "预测：校准拟合 {file}，{model} 在本机上",
    "plan.how.short_calibrated_elsewhere": "预测：校准拟合 {file}，{model} 在另一台机器上",
    "plan.answer.how": "如何得到：",
    "plan.answer.elsewhere": "**在另一台机器上测得**：这份校准属于 {there}，不是本机（{here}）；"
                             "要得到本机的答案，请在本机校准（`python -m kvviz.sim calibrate`）",
    "plan.answer.overhead": "每个预测的 TTFT 都包含校准文件中的请求开销（{ms} 毫秒）：与实测一样，是客户端的视角",
    "plan.answer.replica": "一个副本：{blocks} 个 KV 块，每块 {block} 个 token；"
                           "每步最多 {seqs} 个序列、{tokens} 个 token",
    "plan.answer.load_open": "{load} 请求/秒",
    "plan.answer.load_closed": "{load} 个在途请求",
    "plan.answer.asked": "在 {load} 下：**{tokens} 输出 token/秒**，TTFT p99 {ttft} 毫秒，TPOT p99 {tpot} 毫秒",
    "plan.answer.knee": "**拐点**：吞吐在 **{rate} 请求/秒** 饱和（{tokens} 输出 token/秒）",
    "plan.answer.none": "一个副本上 **没有速率能满足 SLO**：放宽 SLO，或缩短请求",
    "plan.answer.max_at_knee": "**满足 SLO 的最高速率：{rate} 请求/秒**（{tokens} 输出 token/秒），就是拐点本身："
                               "限制副本的是吞吐，而不是 SLO",
    "plan.answer.max_rate": "**满足 SLO 的最高速率：{rate} 请求/秒**（{tokens} 输出 token/秒）；{next} 请求/秒 "
                            "就不满足了",
    "plan.answer.band": "每一步慢 {pct}% 时：{slower} 请求/秒；快 {pct}% 时：{faster} 请求/秒"
                        "（SLO 不变：这台机器偏离其校准时答案会移动多少；共享机器的速度几分钟内就会这样变化）",
    "plan.answer.replicas": "要达到 **{target} 请求/秒**：**{replicas} 个副本** × {per} {unit} = **{gpus} {unit}**",
    "plan.answer.cost": "成本：一个副本在其最高速率下，**每百万输出 token {cost}**（{hour} {price}）",
    "plan.answer.cost_target": "在目标速率下：**每百万输出 token {cost}**，共 {gpus} {unit}",
    "plan.answer.stopped": "搜索提前停止了：{why}",
    "plan.unit.gpus": "块 GPU",
    "plan.unit.machines": "台机器",
    "plan.unit.gpu_hour": "每 GPU 小时",  # the price's unit, as the answer's cost line gives it
    "plan.unit.machine_hour": "每机器小时",
    "plan.metric.tput": "输出 token/秒",
    "plan.metric.ttft_p50": "TTFT p50（毫秒）",
    "plan.metric.ttft_p99": "TTFT p99（毫秒）",
    "plan.metric.tpot_p50": "TPOT p50（毫秒）",
    "plan.metric.tpot_p99": "TPOT p99（毫秒）",
    "plan.table.load": "负载",
    "plan.table.metric": "指标",
    "plan.table.predicted": "预测",
    "plan.table.measured": "实测",
    "plan.table.error": "误差",
    "plan.check.done": "**在本地 vLLM 上的实测**：{loads} 个负载，每个 {requests} 个请求，每个都用相同的请求和到达时间"
                       "重新预测。误差中位数：{errors}。",
    "plan.check.sep": "，",
}

register(EN, ZH)
