"""The command line's texts (python -m kvviz ...): its errors, notes, and the lines of the generate, compare and
presets reports. The memory report's prose is the calculator's (kvviz/calc/report.py), the batch sweep's is
kvviz/ui/batch_text.py's; the errors kvviz's core raises are translated by template (kvviz/i18n/errors.py).
JSON output and the keys of a run's metrics stay English: they are identifiers a script reads."""

from __future__ import annotations

from kvviz.i18n import register

EN = {
    "cli.error": "kvviz: error: {message}",
    "cli.note": "note: {note}",
    "cli.usage.one_source": "give exactly one of --preset NAME, --config PATH_OR_HUB_ID, or "
                            "--layers/--kv-heads/--head-dim",
    "cli.usage.raw_missing": "raw dimensions need {missing} as well",
    "cli.presets.row": "{name:<{width}}  {params:7.2f} B params  {summary}",
    "cli.static.compiling": "static: compiling the decode step on the first run of this shape (seconds to minutes)",
    "cli.batch.none_ran": "no batch ran: {reason}",
    "cli.compare.cached": "cached:",
    "cli.compare.uncached": "uncached:",
    "cli.compare.speedup": "speedup (uncached time / cached time): {speedup:.2f}x",
    "cli.compare.per_token": "; per decode token: {speedup:.2f}x",
    "cli.compare.identical": "identical",
    "cli.compare.part_at": "part at token {index}",
    "cli.compare.longer": "agree where both ran, but one run is longer",
    "cli.compare.tokens": "tokens: {parted} over {compared} compared",
    "cli.compare.cached_run": "cached run:",
    "cli.compare.uncached_run": "uncached run:",
    "cli.compare.mode_run": "{label} run:",
    "cli.compare.mode": "{label}:",
    "cli.static.identical": "identical to cached",
    "cli.static.part_at": "part from cached at token {index}",
    "cli.static.longer": "agree with cached where both ran, but one run is longer",
    "cli.static.speedup": "speedup (uncached time / static time): {speedup:.2f}x",
    "cli.static.over_cached": "; per decode token against cached: {speedup:.2f}x",
    "cli.static.compile": "compile: {compile_s:.1f} s (once per shape, not in the times above); static cache: "
                          "{tokens:,} tokens, allocated up front",
    "cli.static.tokens": "tokens: {agree}",
}
ZH = {
    "cli.error": "kvviz：错误：{message}",
    "cli.note": "注意：{note}",
    "cli.usage.one_source": "--preset NAME、--config PATH_OR_HUB_ID、--layers/--kv-heads/--head-dim 三者须恰好给出一个",
    "cli.usage.raw_missing": "按原始维度计算还需要 {missing}",
    "cli.presets.row": "{name:<{width}}  {params:7.2f} B 参数  {summary}",
    "cli.static.compiling": "static：此形状首次运行，正在编译解码步（几秒到几分钟）",
    "cli.batch.none_ran": "没有一个批次跑完：{reason}",
    "cli.compare.cached": "有缓存（cached）：",
    "cli.compare.uncached": "无缓存（uncached）：",
    "cli.compare.speedup": "加速比（无缓存用时 / 有缓存用时）：{speedup:.2f}x",
    "cli.compare.per_token": "；按每个解码 token：{speedup:.2f}x",
    "cli.compare.identical": "完全一致",
    "cli.compare.part_at": "从第 {index} 个 token 起不同",
    "cli.compare.longer": "两次都生成的部分一致，但其中一次更长",
    "cli.compare.tokens": "token：{parted}（共比较 {compared} 个）",
    "cli.compare.cached_run": "有缓存运行：",
    "cli.compare.uncached_run": "无缓存运行：",
    "cli.compare.mode_run": "{label}运行：",
    "cli.compare.mode": "{label}：",
    "cli.static.identical": "与有缓存运行完全一致",
    "cli.static.part_at": "从第 {index} 个 token 起与有缓存运行不同",
    "cli.static.longer": "与有缓存运行都生成的部分一致，但其中一次更长",
    "cli.static.speedup": "加速比（无缓存用时 / 静态缓存用时）：{speedup:.2f}x",
    "cli.static.over_cached": "；按每个解码 token 相对有缓存：{speedup:.2f}x",
    "cli.static.compile": "编译：{compile_s:.1f} 秒（每种形状一次，不计入上面的时间）；静态缓存：{tokens:,} 个 token，"
                          "预先分配",
    "cli.static.tokens": "token：{agree}",
}
register(EN, ZH)
