"""The simulator's texts (kvviz/sim, python -m kvviz.sim): its errors, why a run stopped early, and the command
line's result lines. JSON output stays English: its keys are what a script reads."""

from __future__ import annotations

from kvviz.i18n import register

EN = {
    # Errors (kvviz/sim/step_time.py, workload.py, simulate.py).
    "sim.coefficients": "--coefficients must be four or five numbers a,b,c,d[,e] in seconds, none negative; "
                        "got {value!r}",
    "sim.fit_rows": "a fit of the four coefficients needs at least 4 rows whose prefill tokens, decode sequences "
                    "and attention pairs vary independently; got {rows} rows",
    "sim.front_end_bound": "none of the {loads} closed loops can be fitted: in each, vLLM's API server sent the "
                           "tokens in bursts (it fell behind the engine), so their times are the front end's, not "
                           "the engine steps'",
    "sim.calibration_missing": "no calibration file {path}",
    "sim.calibration_bad": "{path} is not a kvviz step-time calibration (its {why} is wrong)",
    "sim.calibration_old": "{path} is a calibration of format {format}, whose d was per KV token read; d is now per "
                           "attention pair (a prompt's attention grows with its square): make it again with "
                           "`python -m kvviz.sim calibrate`",
    "sim.calibration_other": "{path} was calibrated for {what} {theirs}, not {asked}",
    "sim.csv_missing": "no such file {path}",
    "sim.csv_unreadable": "cannot read {path} as CSV ({why})",
    "sim.csv_empty": "{path} has no rows",
    "sim.csv_too_many": "{path} has {n:,} rows; at most {most:,}",
    "sim.csv_columns": "{path} lacks the column(s) {missing} in its header",
    "sim.csv_count": "{path}, line {line}: {column} must be a whole number from {low}, got {value!r}",
    "sim.csv_seconds": "{path}, line {line}: {column} must be seconds, a number from 0, got {value!r}",
    "sim.prefix_longer": "line {line}: the shared prefix ({prefix:,} tokens) is longer than the prompt ({prompt:,})",
    "sim.budget_below_len": "without chunked prefill, max_num_batched_tokens ({budget:,}) must be at least "
                            "max_model_len ({most:,}), as vLLM requires",
    "sim.too_long": "request {i}: {tokens:,} tokens of prompt and output are past max_model_len {most:,}",
    "sim.no_fit": "request {i} needs {blocks:,} KV blocks, more than the whole cache holds ({most:,})",
    "sim.step_time": "the step-time model gave {seconds} s for a step of {step}; a step must take a positive time",
    "sim.stalled": "the scheduler scheduled nothing at step {step} while requests waited (a simulator bug)",
    "sim.no_loop": "give --concurrency (a closed loop), --rate (an open loop) or --workload FILE.csv",
    "sim.rate_with_file": "--workload sends at the file's arrival_s times: give no --rate with it (or --concurrency "
                          "for a closed loop of its lengths)",
    "sim.no_model": "{path} is not a model folder (no config.json in it)",
    "sim.pool_not_modelled": "kvviz does not model this model's KV cache in vLLM: {why}",
    "sim.local_layers": "the simulator keeps full-attention and sliding-window KV groups; this model has {kinds} "
                        "layers, which it does not model (given --num-blocks, it counts them as full attention)",
    "sim.no_blocks": "{space:g} GiB of KV space holds no whole block for this model",
    # Why a run stopped early, and a request it left.
    "sim.stopped_requests": "simulated the first {sent:,} of {of:,} requests (the limit on requests)",
    "sim.stopped_steps": "stopped at the limit of {steps:,} steps",
    "sim.stopped_wall": "stopped after {seconds:g} s of real time ({steps:,} steps simulated)",
    "sim.unfinished": "not finished: the simulation stopped before this request ended",
    # The command line (kvviz/sim/cli.py).
    "sim_cli.error": "error: {message}",
    "sim_cli.header": "predicted by the simulated vLLM V1 scheduler: {completed}/{requests} requests in {duration:.3f} "
                      "s simulated, {steps:,} steps; step time t = {a:.4g} + {b:.4g} × prefill_tokens + "
                      "{c:.4g} × decode_seqs + {d:.4g} × attention_pairs + {e:.4g} × prompt_cross s",
    "sim_cli.throughput": "output {tokens_per_s:,.1f} tok/s  {requests_per_s:.2f} req/s  goodput {goodput:.2f} req/s "
                          "(TTFT <= {slo_ttft:g} s, TPOT <= {slo_tpot:g} s)",
    "sim_cli.latency": "{name:<4} mean {mean} ms  p50 {p50} ms  p90 {p90} ms  p99 {p99} ms",
    "sim_cli.groups": "KV-cache groups: {groups}; each keeps its own block table over the one pool (a block: a "
                      "page for each layer of a group)",
    "sim_cli.group_full": "{n} full attention",
    "sim_cli.group_sliding": "{n} sliding (window {window:,})",
    "sim_cli.kv": "KV blocks in use at most {peak:,} of {capacity:,}; preemptions {preemptions:,}; prefix-cache hits "
                  "{cached:,} tokens; at most {running} running and {waiting} waiting",
    "sim_cli.stopped": "stopped early: {why}",
    "sim_cli.fit": "fitted on {rows} rows: a = {a:.6g} s, b = {b:.6g} s per prefill token, c = {c:.6g} s per decode "
                   "sequence, d = {d:.6g} s per attention pair, e = {e:.6g} s per pair of prompt tokens of two "
                   "requests in a step; residuals rms {rms:.3g} s, max {max:.3g} s",
    "sim_cli.saved": "calibration written to {path}",
    "sim_cli.trace": "per-step trace written to {path}",
    # Capacity under an SLO (kvviz/sim/plan.py, plan_cli.py: `python -m kvviz.sim plan`).
    "sim.plan_no_fit": "no tensor-parallel size up to {most} (pipeline {pp}) fits the weights and one {length:,}-token "
                       "sequence's KV on {gpu}",
    "sim.plan_past_context": "max_model_len {asked:,} is past the model's context ({most:,} tokens)",
    "sim.plan_no_blocks": "give the model folder (--model DIR) or --num-blocks with --calibration",
    "sim.plan_knee_stopped": "the knee's closed loop did not finish: {why}",
    "sim.plan_stopped_points": "the search stopped at its limit of {points} points",
    "sim.plan_stopped_wall": "the search stopped after {seconds:g} s of real time ({points} points simulated)",
    "sim.roofline_spans": "the roofline step time needs each scheduled request's span: the step computes {tokens:,} "
                          "tokens, its spans {spans:,}",
    "sim_plan.how_roofline": "how: the simulated vLLM scheduler with the roofline lower bound of each step for {model} "
                             "on {gpu} (tp {tp}, pp {pp}); every figure below is a roofline lower bound on time, so "
                             "an upper bound on rates: predicted, not measured",
    "sim_plan.how_calibrated": "how: the simulated vLLM scheduler with the calibrated fit in {path} (measured on "
                               "{device}) for {model}: predicted, not measured",
    "sim_plan.elsewhere": "note: this calibration was measured on {there}, not on this machine ({here}): the answer "
                          "is that machine's",
    "sim_plan.engine": "one replica: {blocks:,} KV blocks of {block} tokens, at most {seqs} sequences and {tokens:,} "
                       "tokens a step, max_model_len {length:,}",
    "sim_plan.workload": "workload: {arrivals} arrivals; {prompt:,} prompt "
                         "tokens ({prefix:,} shared) and {output:,} output tokens; {requests} requests per rate tried",
    "sim_plan.slo": "SLO: TTFT p{ttft_q:g} <= {ttft:g} s and TPOT p{tpot_q:g} <= {tpot} ms",
    "sim_plan.knee": "knee: throughput saturates at {rate:.3g} requests/s ({tokens:,.0f} output tokens/s; a closed "
                     "loop at max_num_seqs, {preemptions:,} preemptions)",
    "sim_plan.max_rate": "highest rate one replica holds: {rate} requests/s ({tokens:,.0f} output tokens/s); "
                         "{next} requests/s does not (resolution {resolution:.1f}%, {points} rates simulated)",
    "sim_plan.max_at_knee": "highest rate one replica holds: the knee, {rate:.3g} requests/s ({tokens:,.0f} output "
                            "tokens/s): the SLO holds there and throughput, not the SLO, bounds it ({points} rate(s) "
                            "simulated)",
    "sim_plan.max_open": "highest rate one replica holds: at least {rate:.3g} requests/s ({tokens:,.0f} output "
                         "tokens/s); nothing above it was tried ({points} rates simulated)",
    "sim_plan.none": "no rate holds the SLO: even {rate:.3g} requests/s misses it (TTFT {ttft} ms, TPOT {tpot} ms at "
                     "its percentiles; {points} rates simulated): the limits are below what one request alone takes",
    "sim_plan.none_stopped": "no rate was found to hold the SLO before the search stopped ({points} rates simulated)",
    "sim_plan.replicas": "for {target:g} requests/s: {replicas:,} replica(s) × {per} {unit} = {gpus:,} {unit}",
    "sim_plan.workload_file": "workload: the {requests:,} requests of {path} at each rate tried, {arrivals}; mean "
                              "prompt {prompt:,} tokens ({prefix:,} shared), mean output {output:,} tokens",
    "sim_plan.scaled": "at the file's arrival times scaled to that rate",
    "sim_plan.untimed": "{arrivals} arrivals (the file has no arrival_s)",
    "sim_plan.progress": "  {rate:.4g} requests/s: {held} (TTFT {ttft} ms, TPOT {tpot} ms at their percentiles)",
    "sim_plan.probe": "  probe: {requests} requests one at a time; one alone took TTFT {ttft:.1f} ms, TPOT "
                      "{tpot:.2f} ms ({ratio:.2f} × the calibration's step)",
    "sim_plan.sending": "  {rate:.4g} requests/s: sending {requests} requests to vLLM (arrivals over about "
                        "{seconds:.0f} s)",
    "sim_plan.held": "held",
    "sim_plan.not_held": "not held",
    "sim_plan.poisson": "Poisson",
    "sim_plan.constant": "evenly spaced",
    "sim_plan.gpus": "GPU(s)",
    "sim_plan.machines": "machine(s)",
    "sim_plan.cost": "cost: {at_max:.4g} per million output tokens with one replica at its highest rate ({price:g} "
                     "per GPU-hour)",
    "sim_plan.cost_target": "cost at the target rate: {at_target:.4g} per million output tokens over {gpus:,} GPU(s)",
    "sim_plan.band": "with every step {pct:g}% slower: {slower:.3g} requests/s; {pct:g}% faster: {faster:.3g} "
                     "requests/s (the SLO as given: how far the answer moves when the machine runs off its step time)",
    "sim_cli.calibrated": "calibrated {model} on vLLM {vllm} ({blocks:,} KV blocks) on {device}, from {loads} loads",
    "sim_cli.overhead": "request overhead (the client's mean TTFT less vLLM's own, added to TTFT and E2E): {ms:.1f} "
                        "ms; requests sent together reach the engine {handoff_ms:.1f} ms apart",
    "sim_cli.overhead_alone": "request overhead (added to TTFT and E2E): {ms:.1f} ms, the client's mean TTFT less "
                              "vLLM's own ({http_ms:.1f} ms) and vLLM's front end alone (its TTFT less its queue "
                              "and prefill times on the loop of one: {alone_ms:.1f} ms); prompts' cost fitted on "
                              "vLLM's prefill times, not the client's TTFTs; requests sent together reach the engine "
                              "{handoff_ms:.1f} ms apart",
    "sim_cli.point": "{model}, {load} (load average {load_average}): error output tok/s {output_tokens_per_s}, TPOT "
                     "p50 {tpot_p50_s}, TTFT p50 {ttft_p50_s}, E2E p50 {e2e_p50_s}",
    "sim_cli.mape": "{model}: MAPE over {points} held-out points: output tok/s {output_tokens_per_s}, TPOT p50 "
                    "{tpot_p50_s}, TTFT p50 {ttft_p50_s}, E2E p50 {e2e_p50_s}",
    "sim_cli.steps": "    vLLM ran {steps} steps (simulated: {predicted}); median decode step {decode_ms:.1f} ms "
                     "of model time (simulated step: {predicted_ms:.1f} ms); stalls: {stalls} of decode time",
    "sim_cli.repeat": "{model}: the same {points} loads measured twice moved by (mean |second - first| / first) "
                      "output tok/s {output_tokens_per_s}, TPOT p50 {tpot_p50_s}, TTFT p50 {ttft_p50_s}, E2E p50 "
                      "{e2e_p50_s}: no prediction's error can be read finer than that",
    "sim_cli.tpot_split": "{model}: mean TPOT predicted against the client's, MAPE {tpot_mean_s}; against vLLM's "
                          "engine clock (its decode time, before the API server streams), {engine_tpot_mean_s} "
                          "({points} points)",
    "sim_cli.onset": "{model}: preemption starts at concurrency {measured} on vLLM, {predicted} predicted",
    "sim_cli.onset_as_full": "{model}: its sliding-window layers counted as full attention, {predicted} would be "
                             "predicted",
    "sim_cli.v_ready": "{model}: vLLM ready, {blocks:,} KV blocks of {size}",
    "sim_cli.c_load": "calibration load {i}/{n}, {load} (load average {load_average}): TPOT p50 {tpot_ms:.1f} ms",
    "sim_cli.v_fitted": "{model}: fitted a = {a:.4g} s, b = {b:.4g}, c = {c:.4g}, d = {d:.4g}; request overhead "
                        "{overhead:.4g} s; handoff {handoff:.4g} s; residuals rms {rms:.4g} s; {aside} rows set aside "
                        "as stalls",
    "sim_cli.set_aside": "{n} rows set aside as stalls: each took over {ratio:g} times the fitted time of its steps",
    "sim_cli.v_fitted_engine": "{model}: vLLM's API server fell behind the engine in every calibration load (their "
                               "tokens came in bursts), so fitted on vLLM's own clock (each load's mean prefill and "
                               "decode times): a = {a:.4g} s, b = {b:.4g}, c = {c:.4g}, d = {d:.4g}; request overhead "
                               "{overhead:.4g} s; handoff {handoff:.4g} s; residuals rms {rms:.4g} s; {aside} rows set "
                               "aside as stalls",
    "sim_cli.engine_clock": "vLLM's API server fell behind the engine in every closed load (their tokens came in "
                            "bursts): fitted on vLLM's own clock instead, each load's mean prefill and decode times",
    "sim_cli.engine_clock_loads": "{n} closed loads fitted by vLLM's own clock (their mean prefill and decode "
                                  "times): vLLM's API server fell behind the engine in them (their tokens came in "
                                  "bursts): {loads}",
    "sim_cli.paced_out": "{n} closed loads left out of the fit: vLLM's API server fell behind the engine in them "
                         "(their tokens came in bursts): {loads}",
    "sim_cli.v_point": "{model}, {load} (load average {load_average}): error output tok/s {output_tokens_per_s}, "
                       "TPOT p50 {tpot_p50_s}, TTFT p50 {ttft_p50_s}, E2E p50 {e2e_p50_s}; preemptions measured "
                       "{measured}, predicted {predicted}",
    "sim_cli.v_drift": "{model}: the calibration's {load} again after the held-out loads moved by: output tok/s "
                       "{output_tokens_per_s}, TPOT p50 {tpot_p50_s}, TTFT p50 {ttft_p50_s}, E2E p50 {e2e_p50_s}",
}

ZH = {
    "sim.coefficients": "--coefficients 须为四个或五个数 a,b,c,d[,e]（单位秒，不得为负），收到 {value!r}",
    "sim.fit_rows": "拟合四个系数至少需要 4 行，且预填充 token 数、解码序列数、注意力对数须各自独立变化；"
                    "收到 {rows} 行",
    "sim.front_end_bound": "{loads} 个闭环负载都无法拟合：每个负载中 vLLM 的 API 服务器都是成批发送 token（它落后于"
                           "引擎），这些时间属于前端，而不是引擎的步",
    "sim.calibration_missing": "没有校准文件 {path}",
    "sim.calibration_bad": "{path} 不是 kvviz 的步时校准文件（其 {why} 不对）",
    "sim.calibration_old": "{path} 是格式 {format} 的校准，其 d 按每读取一个 KV token 计；现在 d 按每个注意力对计"
                           "（提示词的注意力随其长度的平方增长）：请用 `python -m kvviz.sim calibrate` 重新校准",
    "sim.calibration_other": "{path} 是为 {what} {theirs} 校准的，不是 {asked}",
    "sim.csv_missing": "没有文件 {path}",
    "sim.csv_unreadable": "无法把 {path} 读作 CSV（{why}）",
    "sim.csv_empty": "{path} 没有数据行",
    "sim.csv_too_many": "{path} 有 {n:,} 行；至多 {most:,} 行",
    "sim.csv_columns": "{path} 的表头缺少列 {missing}",
    "sim.csv_count": "{path} 第 {line} 行：{column} 须为从 {low} 起的整数，收到 {value!r}",
    "sim.csv_seconds": "{path} 第 {line} 行：{column} 须为秒数（从 0 起的数），收到 {value!r}",
    "sim.prefix_longer": "第 {line} 行：共享前缀（{prefix:,} 个 token）比提示词（{prompt:,} 个）还长",
    "sim.budget_below_len": "不开分块预填充（chunked prefill）时，max_num_batched_tokens（{budget:,}）须不小于 "
                            "max_model_len（{most:,}），vLLM 如此要求",
    "sim.too_long": "请求 {i}：提示词与输出共 {tokens:,} 个 token，超过 max_model_len {most:,}",
    "sim.no_fit": "请求 {i} 需要 {blocks:,} 个 KV 块，超过整个缓存的容量（{most:,}）",
    "sim.step_time": "步时模型对内容为 {step} 的一步给出 {seconds} 秒；一步的时间必须为正",
    "sim.stalled": "第 {step} 步调度器什么都没调度，而仍有请求在等（模拟器的缺陷）",
    "sim.no_loop": "请给出 --concurrency（闭环）、--rate（开环）或 --workload FILE.csv",
    "sim.rate_with_file": "--workload 按文件中的 arrival_s 时刻发送：不要同时给 --rate"
                          "（或用 --concurrency 以其长度做闭环）",
    "sim.no_model": "{path} 不是模型文件夹（其中没有 config.json）",
    "sim.pool_not_modelled": "kvviz 未对此模型在 vLLM 中的 KV Cache 建模：{why}",
    "sim.local_layers": "模拟器只模拟全注意力与滑动窗口两种 KV 组；此模型含 {kinds} 层，不在模拟之列"
                        "（若给出 --num-blocks，则按全注意力计）",
    "sim.no_blocks": "{space:g} GiB 的 KV 空间放不下此模型的一个完整块",
    "sim.stopped_requests": "只模拟了 {of:,} 个请求中的前 {sent:,} 个（请求数上限）",
    "sim.stopped_steps": "到达 {steps:,} 步的上限而停止",
    "sim.stopped_wall": "实际运行 {seconds:g} 秒后停止（已模拟 {steps:,} 步）",
    "sim.unfinished": "未完成：模拟在此请求结束前停止",
    "sim_cli.error": "错误：{message}",
    "sim_cli.header": "模拟的 vLLM V1 调度器预测：{requests} 个请求完成 {completed} 个，模拟时长 {duration:.3f} 秒，"
                      "共 {steps:,} 步；步时 t = {a:.4g} + {b:.4g} × 预填充 token + {c:.4g} × 解码序列 + "
                      "{d:.4g} × 注意力对 + {e:.4g} × 跨请求预填充 token 对 秒",
    "sim_cli.throughput": "输出吞吐 {tokens_per_s:,.1f} tok/s  {requests_per_s:.2f} 请求/秒  有效吞吐（goodput）"
                          "{goodput:.2f} 请求/秒（首 token 延迟 <= {slo_ttft:g} 秒，每 token 延迟 <= {slo_tpot:g} 秒）",
    "sim_cli.latency": "{name:<4} 均值 {mean} ms  p50 {p50} ms  p90 {p90} ms  p99 {p99} ms",
    "sim_cli.groups": "KV Cache 分组：{groups}；每组在同一个块池上有自己的块表（一个块：组内每层各一页）",
    "sim_cli.group_full": "{n} 个全注意力组",
    "sim_cli.group_sliding": "{n} 个滑动窗口组（窗口 {window:,}）",
    "sim_cli.kv": "KV 块最多占用 {peak:,} / {capacity:,}；抢占 {preemptions:,} 次；前缀缓存命中 {cached:,} 个 token；"
                  "最多 {running} 个运行、{waiting} 个等待",
    "sim_cli.stopped": "提前停止：{why}",
    "sim_cli.fit": "用 {rows} 行拟合：a = {a:.6g} 秒，b = 每个预填充 token {b:.6g} 秒，c = 每个解码序列 {c:.6g} 秒，"
                   "d = 每个注意力对 {d:.6g} 秒，e = 同一步内两个请求的预填充 token 每对 {e:.6g} 秒；"
                   "残差均方根 {rms:.3g} 秒，最大 {max:.3g} 秒",
    "sim_cli.saved": "校准已写入 {path}",
    "sim_cli.trace": "逐步轨迹已写入 {path}",
    "sim.plan_no_fit": "在 {gpu} 上，张量并行至多 {most}（流水线 {pp}）也放不下权重加一条 {length:,} token 序列的 KV",
    "sim.plan_past_context": "max_model_len {asked:,} 超过模型的上下文长度（{most:,} 个 token）",
    "sim.plan_no_blocks": "使用 --calibration 时请给出模型文件夹（--model DIR）或 --num-blocks",
    "sim.plan_knee_stopped": "拐点的闭环模拟没有跑完：{why}",
    "sim.plan_stopped_points": "搜索到达 {points} 个点的上限而停止",
    "sim.plan_stopped_wall": "搜索在实际运行 {seconds:g} 秒后停止（已模拟 {points} 个点）",
    "sim.roofline_spans": "屋顶线步时需要每个被调度请求的区间：这一步计算 {tokens:,} 个 token，区间合计 {spans:,} 个",
    "sim_plan.how_roofline": "方法：模拟的 vLLM 调度器，每一步取 {model} 在 {gpu}（tp {tp}，pp {pp}）上的屋顶线下界；"
                             "以下所有数字都是时间的屋顶线下界，即速率的上界：是预测，不是测量",
    "sim_plan.how_calibrated": "方法：模拟的 vLLM 调度器，步时取 {path} 中的校准拟合"
                               "（在 {device} 上测得），模型 {model}：是预测，不是测量",
    "sim_plan.elsewhere": "注意：这份校准是在 {there} 上测得的，不是本机（{here}）：答案属于那台机器",
    "sim_plan.engine": "单个副本：{blocks:,} 个 KV 块（每块 {block} 个 token），"
                       "每步至多 {seqs} 条序列、{tokens:,} 个 token，max_model_len {length:,}",
    "sim_plan.workload": "负载：{arrivals}到达；提示词 {prompt:,} 个 token（共享 {prefix:,} 个），"
                         "输出 {output:,} 个 token；每个尝试的速率发送 {requests} 个请求",
    "sim_plan.slo": "SLO：首 token 延迟 p{ttft_q:g} <= {ttft:g} 秒，每 token 延迟 p{tpot_q:g} <= {tpot} 毫秒",
    "sim_plan.knee": "拐点：吞吐在 {rate:.3g} 请求/秒处饱和（输出 {tokens:,.0f} token/秒；以 max_num_seqs 并发的闭环，"
                     "抢占 {preemptions:,} 次）",
    "sim_plan.max_rate": "单个副本能承受的最高速率：{rate} 请求/秒（输出 {tokens:,.0f} token/秒）；"
                         "{next} 请求/秒则不能（分辨率 {resolution:.1f}%，模拟了 {points} 个速率）",
    "sim_plan.max_at_knee": "单个副本能承受的最高速率：即拐点 {rate:.3g} 请求/秒（输出 {tokens:,.0f} token/秒）："
                            "在此 SLO 仍满足，限制副本的是吞吐而非 SLO（模拟了 {points} 个速率）",
    "sim_plan.max_open": "单个副本能承受的最高速率：至少 {rate:.3g} 请求/秒（输出 {tokens:,.0f} token/秒）；"
                         "更高的速率未尝试（模拟了 {points} 个速率）",
    "sim_plan.none": "没有速率能满足 SLO：即使 {rate:.3g} 请求/秒也不满足（在所给百分位上首 token 延迟 {ttft} 毫秒、"
                     "每 token 延迟 {tpot} 毫秒；模拟了 {points} 个速率）：限值低于单个请求本身所需的时间",
    "sim_plan.none_stopped": "搜索停止前没有找到满足 SLO 的速率（模拟了 {points} 个速率）",
    "sim_plan.replicas": "要承受 {target:g} 请求/秒：{replicas:,} 个副本 × {per} {unit} = {gpus:,} {unit}",
    "sim_plan.workload_file": "负载：在每个尝试的速率下发送 {path} 中的 {requests:,} 个请求，{arrivals}；"
                              "平均提示词 {prompt:,} 个 token（共享 {prefix:,} 个），平均输出 {output:,} 个 token",
    "sim_plan.scaled": "按该速率缩放文件中的到达时间",
    "sim_plan.untimed": "{arrivals}到达（文件没有 arrival_s 列）",
    "sim_plan.probe": "  探测：逐个发送 {requests} 个请求；单个请求 TTFT {ttft:.1f} 毫秒，TPOT {tpot:.2f} 毫秒"
                      "（校准步时的 {ratio:.2f} 倍）",
    "sim_plan.sending": "  {rate:.4g} 请求/秒：向 vLLM 发送 {requests} 个请求（到达约持续 {seconds:.0f} 秒）",
    "sim_plan.progress": "  {rate:.4g} 请求/秒：{held}（按各自分位数，首 token 延迟 {ttft} 毫秒，"
                         "每 token 延迟 {tpot} 毫秒）",
    "sim_plan.held": "满足",
    "sim_plan.not_held": "不满足",
    "sim_plan.poisson": "泊松",
    "sim_plan.constant": "均匀间隔",
    "sim_plan.gpus": "块 GPU",
    "sim_plan.machines": "台机器",
    "sim_plan.cost": "成本：单个副本在其最高速率下，每百万输出 token {at_max:.4g}（每 GPU 小时 {price:g}）",
    "sim_plan.cost_target": "目标速率下的成本：每百万输出 token {at_target:.4g}，共 {gpus:,} 块 GPU",
    "sim_plan.band": "每一步慢 {pct:g}% 时：{slower:.3g} 请求/秒；快 {pct:g}% 时：{faster:.3g} 请求/秒"
                     "（SLO 不变：机器偏离其步时，答案会移动多少）",
    "sim_cli.calibrated": "已在 {device} 上对 vLLM {vllm}（{blocks:,} 个 KV 块）校准 {model}，用了 {loads} 组负载",
    "sim_cli.overhead": "请求开销（客户端测得的平均 TTFT 减去 vLLM 自己的，计入 TTFT 和 E2E）：{ms:.1f} ms；"
                        "同时发出的请求相隔 {handoff_ms:.1f} ms 到达引擎",
    "sim_cli.overhead_alone": "请求开销（计入 TTFT 和 E2E）：{ms:.1f} ms，即客户端测得的平均 TTFT 减去 vLLM 自己的"
                              "（{http_ms:.1f} ms），加上只有一个请求时 vLLM 前端的时间（一次一个请求的闭环里，"
                              "vLLM 的 TTFT 减去排队与预填充时间：{alone_ms:.1f} ms）；提示词的开销按 vLLM 的预填充"
                              "时间拟合，而非客户端的 TTFT；同时发出的请求相隔 {handoff_ms:.1f} ms 到达引擎",
    "sim_cli.point": "{model}，{load}（负载均值 {load_average}）：误差 输出 tok/s {output_tokens_per_s}，TPOT p50 "
                     "{tpot_p50_s}，TTFT p50 {ttft_p50_s}，E2E p50 {e2e_p50_s}",
    "sim_cli.mape": "{model}：{points} 个留出点的平均绝对百分比误差（MAPE）：输出 tok/s {output_tokens_per_s}，"
                    "TPOT p50 {tpot_p50_s}，TTFT p50 {ttft_p50_s}，E2E p50 {e2e_p50_s}",
    "sim_cli.steps": "    vLLM 运行了 {steps} 步（模拟：{predicted}）；解码步的模型时间中位数 {decode_ms:.1f} ms"
                     "（模拟的一步：{predicted_ms:.1f} ms）；停顿占解码步时间的 {stalls}",
    "sim_cli.repeat": "{model}：同样的 {points} 个负载测两次，变化（|第二次 - 第一次| / 第一次 的均值）为 输出 tok/s "
                      "{output_tokens_per_s}，TPOT p50 {tpot_p50_s}，TTFT p50 {ttft_p50_s}，E2E p50 {e2e_p50_s}："
                      "任何预测的误差都无法读得比这更细",
    "sim_cli.tpot_split": "{model}：预测的平均 TPOT 对客户端测得的，MAPE {tpot_mean_s}；"
                          "对 vLLM 引擎自己的时钟（其解码时间，在 API 服务器流式发送之前），"
                          "{engine_tpot_mean_s}（{points} 个点）",
    "sim_cli.onset": "{model}：vLLM 在并发 {measured} 时开始抢占，预测为 {predicted}",
    "sim_cli.onset_as_full": "{model}：若把滑动窗口层当作全注意力层，预测将为 {predicted}",
    "sim_cli.v_ready": "{model}：vLLM 已就绪，{blocks:,} 个 KV 块，每块 {size} 个 token",
    "sim_cli.c_load": "校准负载 {i}/{n}，{load}（负载均值 {load_average}）：TPOT p50 {tpot_ms:.1f} ms",
    "sim_cli.v_fitted": "{model}：拟合得 a = {a:.4g} 秒，b = {b:.4g}，c = {c:.4g}，d = {d:.4g}；"
                        "请求开销 {overhead:.4g} 秒；交接间隔 {handoff:.4g} 秒；残差均方根 {rms:.4g} 秒；"
                        "{aside} 行作为停顿被搁置",
    "sim_cli.set_aside": "{n} 行作为停顿被搁置：每行耗时都超过其各步拟合耗时的 {ratio:g} 倍",
    "sim_cli.v_fitted_engine": "{model}：每个校准负载中 vLLM 的 API 服务器都落后于引擎（token 成批到达），因此改用 "
                               "vLLM 自己的时钟拟合（各负载的平均预填充与解码时间）：a = {a:.4g} 秒，b = {b:.4g}，"
                               "c = {c:.4g}，d = {d:.4g}；请求开销 {overhead:.4g} 秒；交接间隔 {handoff:.4g} 秒；"
                               "残差均方根 {rms:.4g} 秒；{aside} 行作为停顿被搁置",
    "sim_cli.engine_clock": "每个闭环负载中 vLLM 的 API 服务器都落后于引擎（token 成批到达）：改用 vLLM 自己的时钟"
                            "拟合，即各负载的平均预填充与解码时间",
    "sim_cli.engine_clock_loads": "{n} 个闭环负载改用 vLLM 自己的时钟拟合（其平均预填充与解码时间）：其中 vLLM 的 "
                                  "API 服务器落后于引擎（token 成批到达）：{loads}",
    "sim_cli.paced_out": "{n} 个闭环负载未参与拟合：其中 vLLM 的 API 服务器落后于引擎（token 成批到达）：{loads}",
    "sim_cli.v_point": "{model}，{load}（负载均值 {load_average}）：误差 输出 tok/s {output_tokens_per_s}，TPOT p50 "
                       "{tpot_p50_s}，TTFT p50 {ttft_p50_s}，E2E p50 {e2e_p50_s}；"
                       "抢占 实测 {measured}，预测 {predicted}",
    "sim_cli.v_drift": "{model}：校准的 {load} 在留出负载之后再测一次，变化：输出 tok/s {output_tokens_per_s}，"
                       "TPOT p50 {tpot_p50_s}，TTFT p50 {ttft_p50_s}，E2E p50 {e2e_p50_s}",
}

register(EN, ZH)
