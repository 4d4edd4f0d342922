"""The Serving tab's own texts in both languages: every endpoint that makes text takes the page's language as its
last input, and a finished job's status line and explanation are in that language (English as before)."""

from __future__ import annotations

import gradio as gr

from kvviz.engine.hosting import HostPolicy
from kvviz.serving.endpoint import endpoint
from kvviz.serving.live import PREFIX, Outcome, Plan
from kvviz.serving.load import Load
from kvviz.serving.local import LocalEngine
from kvviz.ui.lang import language_switch
from kvviz.ui.serving.tab import final_update, kind_name, serving_tab
from kvviz.ui.sessions import SessionStore
from tests.ui.test_serving_text import prefix_run


def test_every_text_endpoint_takes_the_language_last():
    with gr.Blocks() as demo:
        lang = language_switch()
        serving_tab(HostPolicy(), LocalEngine(), SessionStore(), lang)
    inputs = {d["api_name"]: d["inputs"] for d in demo.get_config_file()["dependencies"] if d.get("api_name")}
    for name in ("serve", "start_vllm", "stop_vllm", "serve_on_engine"):
        assert inputs[name][-1] == lang._id, f"/{name} must take lang as its last input"
    assert inputs["stop_serving"] == [], "Stop says nothing, so it takes no language"


def outcome(cancelled: bool = False) -> Outcome:
    plan = Plan(PREFIX, endpoint("http://127.0.0.1:8000/v1", "tiny"), Load(concurrency=2, requests=8), 600, 500)
    return Outcome(plan, (prefix_run(0, 4800, 0.8, 0.12), prefix_run(3584, 4096, 0.16, 0.03)), cancelled)


def test_a_finished_experiment_in_english_and_chinese():
    """The prefix-cache experiment, 2 runs of 8 requests, stopped: status, the Stop note and the explanation."""
    en = final_update(outcome(cancelled=True))
    assert en[0] == "prefix-cache experiment finished: 2 run(s), 16 request(s)"
    assert en[-2].startswith("**Stopped**: the figures cover what ran before Stop.\n\nWith the shared prefix, 87.5%")
    zh = final_update(outcome(cancelled=True), "zh")
    assert zh[0] == "前缀缓存实验完成：2 次运行，16 个请求"
    assert zh[-2].startswith("**已停止**：图中只包含停止之前运行的部分。\n\n"
                             "有共享前缀时，服务端查找的提示词 token 中有 87.5%")
    assert zh[-1] == en[-1], "the job's JSON is data: the same in every language"


def test_kind_names():
    assert [kind_name(k) for k in ("one load", "sweep", "prefix-cache experiment")] == \
        ["one load", "sweep", "prefix-cache experiment"]
    assert [kind_name(k, "zh") for k in ("one load", "sweep", "prefix-cache experiment")] == \
        ["单次负载", "并发扫描（sweep）", "前缀缓存实验"]
