"""kvviz's errors and progress messages in Chinese: real errors, raised by the real validators and the real
loader, and the memory model's labels, notes and schemes made by the real model, read in the Chinese written out
here by hand; nothing is translated by matching its English. (tests/test_error_keys.py checks every keyed text the
source builds.)"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys

import httpx
import pytest

from kvviz.base.urls import base_url
from kvviz.calc.arch import architecture_from_dict, architecture_from_dims
from kvviz.calc.dtypes import kv_dtype
from kvviz.calc.hardware import ACCELERATORS, bandwidth_source
from kvviz.calc.presets import load_preset
from kvviz.calc.report import MemoryQuery, memory_report
from kvviz.engine.batch import BatchRequest
from kvviz.engine.batch_sweep import batch_sizes, decode_context
from kvviz.engine.hosting import HostPolicy
from kvviz.engine.loading import LoadError, load_model, resolve_device, resolve_dtype
from kvviz.engine.request import GenerationRequest
from kvviz.i18n import said
from kvviz.i18n.errors import translate
from kvviz.serving.endpoint import endpoint
from kvviz.serving.http1 import HttpError
from kvviz.serving.models import model_folder
from kvviz.serving.sse import server_message, transport_message
from tests.helpers import REPO

CJK = re.compile(r"[\u4e00-\u9fff]")
CONFIG_ONLY = REPO / "tests" / "serving" / "config-only"  # tiny's config.json alone: no weights
HOSTED = HostPolicy(hosted=True)


# (what raises, the Chinese a person reads), the Chinese typed out by hand.
REAL = [
    (lambda: GenerationRequest.from_untrusted("", 8), "提示词（prompt）为空"),
    (lambda: GenerationRequest.from_untrusted("hi", 0), "max_new_tokens 须在 1 到 4,096 之间，收到 0"),
    (lambda: GenerationRequest.from_untrusted("hi", 8.5), "max_new_tokens 须为整数，收到 8.5"),
    (lambda: GenerationRequest.from_untrusted("hi", 8, temperature=math.nan),
     "temperature (0 = greedy) 须为数字，收到 nan"),
    (lambda: GenerationRequest.from_untrusted("hi", 8, top_p=2), "top_p 须在 (0, 1] 范围内，收到 2"),
    (lambda: GenerationRequest.from_untrusted(5, 8), "提示词（prompt）须为文本，收到 5"),
    (lambda: GenerationRequest.from_untrusted("hi", 8, chat_template="yes"),
     "chat_template 须为 true 或 false，收到 'yes'"),
    (lambda: GenerationRequest.from_untrusted("hi", 8, use_cache=False, static=True),
     "static 需要 use_cache：静态模式就是在预分配的缓存上运行的有缓存循环"),
    (lambda: GenerationRequest.from_untrusted("hi", 1000, policy=HOSTED),
     "max_new_tokens 为 1,000；本演示最多允许 256"),
    (lambda: HOSTED.check_model(""), "未指定模型"),
    (lambda: HOSTED.check_model("random:nope"),
     "随机权重孪生模型（random twin）没有预设 'nope'；可选：random:gpt2, random:smollm2-135m, random:qwen2.5-0.5b, "
     "random:qwen3-0.6b"),
    (lambda: HOSTED.check_model("random:llama-2-7b"),
     "random:llama-2-7b 有 6,738 M 参数；本演示只允许小于 600 M 的孪生模型"),
    (lambda: HOSTED.check_source("./config.json"),
     "本托管演示不读取本地文件：请填 hub id（如 Qwen/Qwen2.5-0.5B-Instruct），或选一个预设"),
    (lambda: HOSTED.check_endpoint("http://example.com"),
     "本托管演示只连接自己的端点（没有：只有本地 vLLM）；'http://example.com' 不在其中"),
    (lambda: BatchRequest(prompts=("a", " ")), "批次中第 2 条提示词为空"),
    (lambda: BatchRequest(prompts=()), "一个批次需要 1 到 1,024 条提示词，收到 0 条"),
    (lambda: batch_sizes(0), "max_batch 至少为 1，收到 0"),
    (lambda: decode_context(8, 1), "扫描至少需要 2 个新 token（一次预填充，再一步解码），收到 1"),
    (lambda: resolve_device("tpu"), "未知的设备 'tpu'；可用：auto、cpu、cuda 或 mps"),
    (lambda: resolve_dtype("fp8", resolve_device("cpu")), "未知的 dtype 'fp8'；可用：auto、fp32, bf16, fp16"),
    (lambda: load_model("random:nope"),
     "随机权重孪生模型（random twin）没有预设 'nope'；运行 'python -m kvviz presets' 查看全部预设"),
    (lambda: load_model("/no/such/model"), "没有这个模型文件夹、预设孪生模型或 hub id：/no/such/model"),
    (lambda: memory_report(load_preset("llama-2-7b"), MemoryQuery(mem_util=0)), "mem_util 须在 (0, 1] 范围内，收到 0"),
    (lambda: memory_report(load_preset("llama-2-7b"), MemoryQuery(tp=3)),
     "tp 3 不能整除模型的 32 个查询头（每块 GPU 持有完整的注意力头）；这个模型可用 tp = 1, 2, 4, 8, 16 或 32"),
    (lambda: memory_report(load_preset("llama-2-7b"), MemoryQuery(pp=40)),
     "pp 40 超过了模型的 32 层（流水线并行的每一级至少需要一层）"),
    (lambda: kv_dtype("fp7"), "未知的 KV dtype 'fp7'；可选：fp32, fp16, bf16, fp8, int8, int4"),
    (lambda: load_preset("nope"), "未知的预设 'nope'；运行 'python -m kvviz presets' 查看全部预设"),
    (lambda: architecture_from_dims(3, 3, 64, heads=4), "heads（4）须为 kv_heads（3）的整数倍"),
    (lambda: architecture_from_dims(4, 2, 64, sliding_layers=2), "滑动窗口层需要 sliding_window"),
    (lambda: architecture_from_dict({"num_hidden_layers": 2}), "配置缺少 'model_type' 一项"),
    (lambda: base_url("ftp://x"), "端点须为带主机名的 http:// 或 https:// URL，收到 'ftp://x'"),
    (lambda: base_url("http://u:p@x"), "端点 URL 不能包含 user:password@；请在 API key 一栏填写密钥"),
    (lambda: endpoint("http://x", " "), "模型名为空；请填服务器所提供的模型名（见其 /v1/models）"),
    (lambda: endpoint("http://x", "m", api="grpc"), "未知的 API 'grpc'；可选：completions, chat"),
    (lambda: model_folder(str(CONFIG_ONLY)),
     f"'{CONFIG_ONLY}' 没有权重（没有 *.safetensors、*.bin 或 *.pt 文件）；可要求使用虚拟权重，"
     "按其配置以随机权重提供服务（--dummy-weights）"),
]


@pytest.mark.parametrize(("call", "zh"), REAL, ids=[zh[:24] for _, zh in REAL])
def test_a_real_message_reads_in_chinese(call, zh):
    """The error the core raises for bad input reads in Chinese as written here, and in English as its str()."""
    with pytest.raises((ValueError, RuntimeError)) as raised:  # RuntimeError: LoadError
        call()
    message = str(raised.value).splitlines()[0]
    assert translate(raised.value, "zh") == zh, f"{message!r} reads wrong in Chinese"
    assert translate(raised.value, "en") == message


def test_loading_progress_reads_in_chinese():
    """Every progress line of loading tiny and a random twin, and the twin's tokenizer note, has a Chinese form;
    those of tiny are pinned. (Loaded in a fresh process: this one may already hold the models, and a kept model
    reports no progress.)"""
    script = ("import json; from kvviz.engine.loading import load_model; from kvviz.i18n.errors import translate\n"
              "lines = []\n"
              "load_model('tiny', device='cpu', progress=lambda f, m: lines.append(m))\n"
              "twin = load_model('random:gpt2', device='cpu', progress=lambda f, m: lines.append(m))\n"
              "lines.append(twin.tokenizer_note)\n"
              "print(json.dumps([[line, translate(line, 'zh')] for line in lines]))")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=os.environ | {"HF_HUB_OFFLINE": "1"},
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    lines, zh = zip(*json.loads(proc.stdout.splitlines()[-1]), strict=True)
    assert list(zh[:4]) == ["正在加载 tiny 的分词器（tokenizer）", "正在加载 tiny 的权重", "正在把 tiny 移到 cpu",
                      "tiny 已就绪：cpu，fp32"]
    assert len(lines) > 6, lines
    untranslated = [line for line, z in zip(lines, zh, strict=True) if not CJK.search(z)]
    assert not untranslated, f"progress lines with no template: {untranslated}"


@pytest.mark.parametrize(("made", "zh"), [
    (lambda: said("progress.sweep_batch", b=4, n=2, tokens=16), "B=4：先预热，再运行 2 次，每次 16 个 token"),
    (lambda: said("progress.threads"), "正在选择 CPU 线程数"),
    (lambda: LoadError("load.cannot", spec="./m", why=said("load.no_weights")),
     "无法加载 ./m：文件夹里没有权重（没有 model.safetensors、pytorch_model.bin，也没有分片索引）"),
    (lambda: LoadError("load.cannot", spec="./m", why="something new broke"), "无法加载 ./m：something new broke"),
    (lambda: "a message kvviz did not make", "a message kvviz did not make"),
])
def test_messages_made_elsewhere_read_in_chinese(made, zh):
    """Progress and failure lines of the worker, the sweep and the loader, as they are made there (a reason inside
    a reason rendered in the same language; a foreign reason as it is); text kvviz did not key stays as it is."""
    assert translate(made(), "zh") == zh


@pytest.mark.parametrize(("made", "zh"), [
    (lambda: server_message(401, b'{"error": {"message": "bad key"}}'),
     "HTTP 401：服务器拒绝了 API 密钥：bad key"),
    (lambda: HttpError("http.cut_off", url="http://127.0.0.1:8011"), "http://127.0.0.1:8011：服务器在回答结束前关闭了连接"),
    (lambda: transport_message(httpx.ConnectError("Connection refused"), "http://127.0.0.1:8011"),
     "无法连接 http://127.0.0.1:8011：Connection refused"),
])
def test_the_serving_clients_failures_read_in_chinese(made, zh):
    """The serving client's failure lines, made by its own functions, read in Chinese; in English as they are."""
    message = made()
    assert translate(message, "zh") == zh
    assert translate(message, "en") == str(message)


def test_translate_matches_no_english():
    """translate() renders keys only: an English text, even the English of a memory-model label, stays as it is;
    the label made as a keyed text reads in Chinese."""
    assert translate("KV cache", "zh") == "KV cache"
    assert translate(said("calc.label.kv"), "zh") == "KV Cache"


def _report(preset: str, **query):
    return memory_report(load_preset(preset), MemoryQuery(**query))


# (what the memory model says, the Chinese a person reads), made by the real model, the Chinese typed out by hand.
MEMORY_MODEL = [
    (lambda: _report("llama-3-8b").kv.formula.label, "KV Cache"),
    (lambda: _report("gemma-2-9b").kv.formula.label, "KV Cache（应用滑动窗口）"),
    (lambda: _report("qwen3-next-80b-a3b").kv.formula.label, "KV Cache，48 层中有 12 层保留逐 token 的 KV"),
    (lambda: _report("jamba-1.5-mini").kv.state_formula.label, "Mamba 状态（每条序列固定，不随 seq_len 增长）"),
    (lambda: _report("deepseek-v2-lite").kv.formula.label,
     "KV Cache，MLA 潜在向量（vLLM、SGLang 和 transformers >= 5.15 保存的形式）"),
    (lambda: _report("gemma-2-9b").kv.no_window_formula.label,
     "推理引擎忽略滑动窗口时的 KV Cache（为每个 token 分配）"),
    (lambda: _report("llama-3-8b", tp=2, pp=2).parallel.formulas[-1].label,
     "单块 GPU 上每 token 的 KV 字节数（第 1 段：16 层）"),  # stage 1 also holds lm_head and the final norm
    (lambda: _report("llama-3-8b").decode.formulas[-1].label, "解码每步时间（下界）"),
    (lambda: _report("llama-3-8b").prefill.formulas[1].symbolic, "权重读一次 + 写入的 KV Cache"),
    (lambda: _report("llama-3-8b", seq_len=100_000).notes[0], "seq_len 100,000 超出了模型 8,192 个 token 的上下文"),
    (lambda: _report("llama-3-8b", tp=2).notes[0],
     "屋顶线下界按整个模型放在一块 H100 SXM 上计算，没有模拟张量并行或流水线并行"),
    # the defaults listed are transformers' (5.25's FalconConfig adds num_key_value_heads=1), the words ours
    (lambda: load_preset("falcon-7b").notes[0],
     "取自 transformers 的 FalconConfig 默认值（config 中没有给出）：num_hidden_layers=32, num_attention_heads=71, "
     "num_key_value_heads=1"),
    (lambda: kv_dtype("bf16").scheme, "bfloat16，无缩放因子"),
    (lambda: bandwidth_source(ACCELERATORS["h100-sxm"]), "H100 SXM：公开数据"),
    (lambda: bandwidth_source(ACCELERATORS["t4"]), "T4：不支持 bf16：fp16 张量核心，65 TFLOP/s"),
]


@pytest.mark.parametrize(("made", "zh"), MEMORY_MODEL, ids=[zh[:24] for _, zh in MEMORY_MODEL])
def test_the_memory_models_texts_read_in_chinese(made, zh):
    """A formula's label and words, a report's and a config's notes, a format's scheme, a bandwidth's source, as
    the memory model makes them, read in Chinese; in English as they are (their str, what the JSON holds)."""
    text = made()
    assert translate(text, "zh") == zh
    assert translate(text, "en") == str(text) and not CJK.search(text)
