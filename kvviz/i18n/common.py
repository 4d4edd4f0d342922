"""The texts of the app's frame: its title, its tabs, the language switch."""

from __future__ import annotations

from kvviz.i18n import register

EN = {
    "app.title": "kvviz: how LLM inference really behaves",
    "app.intro": "# kvviz\nSee how LLM inference really behaves: the KV cache, prefill and decode, TTFT and TPOT.",
    "app.start": "**New here?** A student or a teacher starts with the **Lesson**: its six questions, each answered "
                 "from a run you make on this page. An engineer sizing GPUs starts with the calculator below.",
    "common.progress_line": "⏳ {what} ({pct})",
    "common.running": "⏳ running…",
    "app.start_lesson": "Start the lesson →",
    "app.language": "Language / 语言",
    "tab.calculator": "KV-cache calculator",
    "tab.generation": "Live generation",
    "tab.compare": "Cached vs uncached",
    "tab.batch": "Batch",
    "tab.lifecycle": "Request lifecycle",
    "tab.serving": "Serving",
    "tab.history": "History",
    "tab.lesson": "Lesson",
    "common.model.hosted": "model (what this hosted demo offers)",
    "common.model.local": "model (SmolLM2-135M-Instruct, bundled tiny, random twins such as random:gpt2, a hub id, "
                          "a folder)",
    "common.model.note": "SmolLM2-135M-Instruct (135 million parameters) makes every step of inference visible on "
                         "a CPU. It writes fluent English but knows little: its answers are output to measure, not "
                         "facts.",
    "common.max_new_tokens": "max new tokens",
    "hosting.note": "Hosted demo limits: models {models}, random twins under {twins} parameters{hub}; at most {new} "
                    "new tokens and {prompt} prompt tokens; {seconds} s per request; at most {queue} {requests} "
                    "waiting. Serving loads: at most {concurrency} in flight and {max_requests} requests, on the local "
                    "vLLM{endpoints}.",
    "hosting.request": "request",
    "hosting.requests": "requests",
    "hosting.endpoints": " and {endpoints}",
}
ZH = {
    "app.title": "kvviz：看清 LLM 推理的真实行为",
    "app.intro": "# kvviz\n看清 LLM 推理的真实行为：KV Cache、预填充（prefill）与解码（decode）、"
                 "首 token 延迟（TTFT）与每 token 延迟（TPOT）。",
    "app.start": "**第一次来？** 学生和老师从**课程**开始：六个问题，每个都用你在本页跑出的结果来回答。"
                 "要为部署估算 GPU 的工程师，从下面的计算器开始。",
    "common.progress_line": "⏳ {what}（{pct}）",
    "common.running": "⏳ 运行中…",
    "app.start_lesson": "开始课程 →",
    "app.language": "Language / 语言",
    "tab.calculator": "KV Cache 显存计算器",
    "tab.generation": "实时生成",
    "tab.compare": "有缓存 vs 无缓存",
    "tab.batch": "批处理（Batch）",
    "tab.lifecycle": "请求生命周期",
    "tab.serving": "服务（Serving）",
    "tab.history": "历史记录",
    "tab.lesson": "课程",
    "common.model.hosted": "模型（本托管演示提供的）",
    "common.model.local": "模型（SmolLM2-135M-Instruct、自带的 tiny、random:gpt2 这类随机权重孪生模型、"
                          "hub id 或本地文件夹）",
    "common.model.note": "SmolLM2-135M-Instruct（1.35 亿参数）让推理的每一步都能在 CPU 上看清。它能写通顺的英文，"
                         "但所知甚少（中文更弱）：它的回答是被测量的输出，不是事实。",
    "common.max_new_tokens": "最大新 token 数",
    "hosting.note": "托管演示的限制：模型 {models}，random 孪生模型参数少于 {twins}{hub}；最多 {new} 个新 token、"
                    "{prompt} 个提示词 token；每个请求 {seconds} 秒；最多 {queue} 个{requests}排队。服务负载：最多 "
                    "{concurrency} 个并发、{max_requests} 个请求，目标为本地 vLLM{endpoints}。",
    "hosting.request": "请求",
    "hosting.requests": "请求",
    "hosting.endpoints": " 以及 {endpoints}",
}
register(EN, ZH)
