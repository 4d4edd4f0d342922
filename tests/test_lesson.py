"""The lesson's six answers from a session's history typed out by hand, in English and Chinese."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from kvviz.calc.arch import architecture_from_dims
from kvviz.lesson import QUESTIONS, PlanNumbers, answers, levels, plan_numbers

RUN = {"run": 3, "model": "tiny", "mode": "cached", "finish": "eos", "prompt": "The kernel", "device": "cpu",
       "dtype": "fp32", "prompt_tokens": 20, "new_tokens": 11, "ttft_s": 0.05, "tpot_s": 0.004,
       "tokens_per_s": 122.222222, "queue_s": 0.03, "tokenize_s": 0.001, "prefill_s": 0.019,
       "prefill_tokens_per_s": 1052.631579, "e2e_s": 0.09, "decode_tokens_per_s": 250.0}
FRAME = pd.DataFrame({"run": [3, 3, 3], "seq_len": [20, 21, 30], "kv_bytes": [20 * 4096, 21 * 4096, 30 * 4096]})
BATCH = [{"kind": "batch", "label": f"batch 1 row {i}", "batch": 1, "batch_size": 4, "row": i, "ttft_s": 0.08,
          "new_tokens": 32, "tokens_per_s": 100.0, "decode_step_median_s": 0.005, "batch_tokens_per_s": 800.0}
         for i in range(4)]


@dataclass(frozen=True)
class History:
    rows: tuple[dict, ...] = ()
    frames: dict = field(default_factory=dict)


def test_questions_are_the_lessons_six_in_order():
    """The six questions, the lesson's Chinese word for word, each with an English translation."""
    assert [q.number for q in QUESTIONS] == [1, 2, 3, 4, 5, 6]
    assert QUESTIONS[0].zh == "1. 用自己的话画出一次 LLM 请求从 HTTP 进入到 streaming 返回的生命周期。"
    assert QUESTIONS[5].zh == "6. 如果一个服务首 token 很慢但后续 token 很快，你会优先检查哪些环节？"
    assert QUESTIONS[2].en == "3. Write the KV Cache memory formula and explain what each variable means."


def test_answers_in_english_from_the_last_run():
    """Every answer quotes the run's own numbers: phases, rates, bytes, TTFT parts."""
    arch = architecture_from_dims(layers=4, kv_heads=2, head_dim=32, heads=8, name="tiny")
    a1, a2, a3, a4, a5, a6 = answers(History((RUN,), {3: FRAME}), "en", arch)
    assert "| queued, waiting for the device | 0 → 30.00 ms |" in a1
    assert "| tokenized (20 prompt tokens) | 31.00 ms |" in a1
    assert "| decode: 10 more tokens, one per forward pass | 50.00 ms → 90.00 ms |" in a1
    assert "input [1, 20]" in a2 and "in 19.00 ms (1,053 tokens/s)" in a2
    assert "input [1, 1]" in a2 and "250 tokens/s, TPOT 4.00 ms" in a2 and "4.2× more tokens" in a2
    assert "one token holds 4 × 2 × 2 × 32 × 4 = 2,048 bytes; batch 16 × seq_len 4096 = 0.125 GiB" in a3
    assert "81,920 bytes after 20 tokens, 122,880 bytes after 30" in a4
    assert "4,096 bytes per token at the first step and 4,096 at the last: the same at every step" in a4
    assert "Nothing batched measured yet" in a5
    assert "TTFT 50.00 ms = queue 30.00 ms + tokenization 1.00 ms + prefill 19.00 ms (20 prompt tokens). " \
           "The largest part: **queue**." in a6


def test_answers_in_chinese():
    """The same numbers in Chinese."""
    a1, a2, a3, a4, _, a6 = answers(History((RUN,), {3: FRAME}), "zh")
    assert "| 排队（queue），等待设备 | 0 → 30.00 ms |" in a1
    assert "它用 19.00 ms 读完 20 个 token（1,053 tokens/s）" in a2
    assert "课程的例子（32 层，32 个 KV 头，head_dim 128，bf16）：16 × 4096 × 32 × 2 × 32 × 128 × 2 字节 = 32 GiB" in a3
    assert "20 个 token 后为 81,920 字节，30 个 token 后为 122,880 字节" in a4
    assert "每一步都相同，所以缓存线性增长" in a4
    assert "TTFT 50.00 ms = 排队 30.00 ms + 分词 1.00 ms + 预填充 19.00 ms（20 个 prompt token）。" \
           "最大的一项：**排队**。" in a6


def test_no_measurement_says_what_to_press():
    """An empty session: every measured answer says which button to press."""
    a1, a2, a3, a4, a5, _ = answers(History(), "en")
    assert a1 == a2 == a4 == ("Nothing measured yet: press **Show me**, then **Generate**, then **Answer with my "
                              "measurements** again.")
    assert "32 GiB" in a3 and "run the Batch tab's sweep (**Show me**)" in a5
    assert answers(History(), "zh")[0] == "还没有测量：点 **带我去看**，再点生成，然后再点一次 **用我的测量回答**。"


def test_throughput_trade_off_from_a_batch_and_a_single_run():
    """A batch of 4 against the single run: 800 against 122.2 tokens/s, TPOT 5 against 4 ms."""
    history = History((RUN, *BATCH), {3: FRAME})
    assert [(v.in_flight, v.tokens_per_s) for v in levels(history)] == [(1, 122.222222), (4, 800.0)]
    a5 = answers(history, "en")[4]
    assert "| batch 1 (4 rows, 4 decoded) | 4 | 800.0 | 80.00 ms | 5.00 ms |" in a5
    assert "From 1 to 4 in flight: throughput × 6.55, TPOT × 1.25." in a5
    assert "并发从 1 到 4：吞吐 × 6.55，TPOT × 1.25。" in answers(history, "zh")[4]


def test_serving_sweep_rows_come_first():
    """Serving rows (one per concurrency) are the levels when there are any."""
    rows = tuple({"kind": "serving", "label": f"sweep c={c}", "concurrency": c, "output_tokens_per_s": 100.0 * c,
                  "ttft_p50_s": 0.1, "tpot_p50_s": 0.01 * c} for c in (1, 2, 4))
    a5 = answers(History((RUN, *BATCH, *rows)), "en")[4]
    assert "| sweep c=2 | 2 | 200.0 | 100.00 ms | 20.00 ms |" in a5
    assert "From 1 to 4 in flight: throughput × 4.00, TPOT × 4.00." in a5


def test_a_batch_counts_the_rows_that_decoded():
    """A batch of 4 whose two rows ended at their first token (an instruct model's end of turn) had 2 in flight
    while it decoded, not 4: the table and the trade-off say 2."""
    rows = tuple(dict(r, new_tokens=n) for r, n in zip(BATCH, (1, 40, 1, 25), strict=True))
    history = History((RUN, *rows), {3: FRAME})
    assert [v.in_flight for v in levels(history)] == [1, 2]
    a5 = answers(history, "en")[4]
    assert "| batch 1 (4 rows, 2 decoded) | 2 | 800.0 |" in a5 and "From 1 to 2 in flight" in a5
    assert "| 批次 1（4 行，2 行进入解码） | 2 |" in answers(history, "zh")[4]


def sweep_rows(sweep: int, rate: float) -> tuple[dict, ...]:
    """A batch sweep's history rows (kvviz.ui.batch.run_text.sweep_history_rows' keys) at B = 1, 2, 4."""
    return tuple({"kind": "sweep", "label": f"sweep {sweep} B={b}", "sweep": sweep, "batch_size": b,
                  "ttft_s": 0.01 * b, "decode_step_median_s": 0.02, "batch_tokens_per_s": rate * b} for b in (1, 2, 4))


def test_the_most_recent_measurement_answers():
    """A batch sweep run after a batch is what question 5 reads (its last sweep, each B); a batch run after the sweep
    takes over again; serving rows older than both do not count."""
    serving = ({"kind": "serving", "label": "c=8", "concurrency": 8, "output_tokens_per_s": 999.0},)
    history = History((*serving, RUN, *BATCH, *sweep_rows(1, 10.0), *sweep_rows(2, 50.0)), {3: FRAME})
    assert [(v.in_flight, v.tokens_per_s) for v in levels(history)] == [(1, 50.0), (2, 100.0), (4, 200.0)]
    a5 = answers(history, "en")[4]
    assert "| sweep 2 B=4 | 4 | 200.0 | 40.00 ms | 20.00 ms |" in a5
    assert "From 1 to 4 in flight: throughput × 4.00, TPOT × 1.00." in a5
    later = History((*history.rows, *(dict(r, batch=2) for r in BATCH)), {3: FRAME})
    assert [(v.in_flight, v.tokens_per_s) for v in levels(later)] == [(1, 122.222222), (4, 800.0)]


def test_questions_5_and_6_lead_to_the_plan_tab_with_the_runs_numbers():
    """A serving sweep at 1, 2 and 4 in flight after run 3 (20 prompt tokens, 11 new): Q5 offers the Plan tab at 4
    in flight, Q6 with 20-token prompts; plan_numbers gives what "Plan it" sets. Nothing measured: nothing set."""
    sweep = tuple({"kind": "serving", "label": f"sweep c={c}", "concurrency": c, "output_tokens_per_s": 100.0 * c,
                   "ttft_p50_s": 0.01 * c, "tpot_p50_s": 0.002 * c} for c in (1, 2, 4))
    history = History((RUN, *sweep), {3: FRAME})
    *_, a5, a6 = answers(history, "en")
    assert "**Plan it** opens the Plan tab at 4 requests in flight" in a5
    assert "**Plan it** opens the Plan tab with this run's 20-token prompts" in a6
    assert "在途请求数为 4（闭环）" in answers(history, "zh")[4]
    assert plan_numbers(history) == PlanNumbers(in_flight=4, prompt_tokens=20, output_tokens=11)
    assert plan_numbers(History()) == PlanNumbers(None, None, None)
