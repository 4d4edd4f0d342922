"""The calibration's fit without a server: per-token gaps made by a known step time through the simulated
scheduler give that step time back; the non-negative least squares on a case worked by hand; a calibration file
refused for another device or another config.json in one line; predict adds the stated request overhead."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from kvviz.serving.metrics_reader import ServerView
from kvviz.sim import calibrate
from kvviz.sim.calibrate import Engine, LoadPoint, Measured, Mix, fit_runs, nonnegative_lstsq, replay
from kvviz.sim.cli import main
from kvviz.sim.step_time import LinearStepTime
from tests.helpers import REPO

TRUE = LinearStepTime(a=0.003, b=4e-5, c=2e-4, d=5e-7)
ENGINE = Engine("tiny", "0" * 64, 1024, 64, 16, 128, 256, 1)
LOADS = (LoadPoint(Mix(40, 20), 6, concurrency=1), LoadPoint(Mix(40, 20), 12, concurrency=4),
         LoadPoint(Mix(300, 8), 8, concurrency=3), LoadPoint(Mix(40, 20), 16, concurrency=8))


def _measured(point: LoadPoint, model: LinearStepTime, ttft_extra_s: float = 0.0,
              handoff_s: float = 0.0, joined: tuple[bool, ...] = (), return_s: float | None = None) -> Measured:
    """A load as if measured on an engine whose steps take `model`'s time, each TTFT and E2E ttft_extra_s longer
    (a client's HTTP and tokenizing), which is also how long a closed loop's next request takes to reach the engine
    after one ends there (the answer's way out and the request's way in) unless return_s says otherwise, requests
    sent together reaching it handoff_s apart (joined: with the one before them)."""
    sim = replay(point, ENGINE, model, handoff_s, joined=joined,
                 return_s=ttft_extra_s if return_s is None else return_s)
    records = tuple(replace(r, ttft_s=r.ttft_s + ttft_extra_s, e2e_s=r.e2e_s + ttft_extra_s) for r in sim.records)
    return Measured(point, records, sim.stats, 0, 0.0)


def test_the_fit_gives_back_the_step_time_that_made_the_gaps():
    """The TTFTs 12 ms longer than the steps (HTTP, tokenizing): the fit's request overhead."""
    fitted = fit_runs([_measured(p, TRUE, 0.012) for p in LOADS], ENGINE)
    for got, true in zip(fitted.step.coefficients(), TRUE.coefficients(), strict=True):
        assert got == pytest.approx(true, rel=1e-6)
    assert fitted.fit.residual_max_s < 1e-9
    assert fitted.request_overhead_s == pytest.approx(0.012, rel=1e-6)


def test_the_fit_gives_back_the_cost_of_a_waves_prompts_together():
    """Steps timed with e = 3e-8 s per pair of prompt tokens of two requests: a wave of four 40-token prompts in one
    step 160² - 4 × 40² = 19,200 pairs, 0.58 ms; the loop of three 300-token prompts' second step 44 of one and 212
    of the next, 2 × 44 × 212 = 18,656. The fit gives all five back, where four terms would have to put that time
    in b or d."""
    bent = replace(TRUE, e=3e-8)
    fitted = fit_runs([_measured(p, bent, 0.012) for p in LOADS], ENGINE)
    for got, true in zip(fitted.step.coefficients(), bent.coefficients(), strict=True):
        assert got == pytest.approx(true, rel=1e-6)
    assert fitted.fit.residual_max_s < 1e-9


def test_the_fit_finds_the_handoff_that_spread_a_wave_and_the_step_time_with_it():
    """Gaps made by TRUE's step time with waves reaching the engine 2 ms apart (steps of 3-15 ms: the first step
    of a wave holds one request, the next some of the rest): the fit's handoff is 2 ms and the step time comes
    back, where the replays with every request at once (the fit of before) leave its TTFT rows far off."""
    runs = [_measured(p, TRUE, 0.012, handoff_s=0.002) for p in LOADS]
    fitted = fit_runs(runs, ENGINE)
    assert fitted.handoff_s == 0.002
    for got, true in zip(fitted.step.coefficients(), TRUE.coefficients(), strict=True):
        assert got == pytest.approx(true, rel=1e-6)
    assert fitted.fit.residual_max_s < 1e-9
    at_once = fit_runs(runs, ENGINE, handoffs=(0.0,))
    assert at_once.handoff_s == 0.0 and at_once.fit.residual_max_s > 1e-3


def test_the_fit_replays_a_wave_as_the_engine_took_it():
    """The engine of the test above, with a loop of 3 of 100-token prompts whose first wave the engine took as vLLM
    sometimes does (its front end racing its first step): the third and second sent in the first step (both
    prompts fit the 256-token budget), the first sent in the next. Made by the replay with the second joined to
    the first (two in step 1), the first and third records' times then swapped. The replay as sent (the handoff:
    one in step 1, the first sent) misfits it; the calibration reads the engine's order and grouping off the
    measured first tokens (engine_order) and gives the step time back."""
    point = LoadPoint(Mix(100, 8), 9, concurrency=3)
    made = _measured(point, TRUE, 0.012, handoff_s=0.002, joined=(False, True))
    first, third = made.records[0], made.records[2]
    timed = ("ttft_s", "e2e_s", "arrivals_s")
    records = (replace(first, **{k: getattr(third, k) for k in timed}), made.records[1],
               replace(third, **{k: getattr(first, k) for k in timed}), *made.records[3:])
    runs = [*(_measured(p, TRUE, 0.012, handoff_s=0.002) for p in LOADS), replace(made, records=records)]
    order, joined = calibrate.engine_order(runs[-1])
    assert (order[:3], joined[:3]) == ([1, 2, 0], (False, True, False))
    fitted = fit_runs(runs, ENGINE)
    assert fitted.handoff_s == 0.002
    for got, true in zip(fitted.step.coefficients(), TRUE.coefficients(), strict=True):
        assert got == pytest.approx(true, rel=1e-6)
    assert fitted.fit.residual_max_s < 1e-9
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(calibrate, "engine_order", lambda m: (list(range(len(m.records))), ()))
        assert fit_runs(runs, ENGINE).fit.residual_max_s > 1e-3


def test_the_engines_order_in_a_wave_is_the_order_of_the_first_tokens():
    """Waves: requests sent within 20 ms of the one before. In each, the requests by their first token's time (a
    failed one last); joined, those whose first token came within 2.5 ms of the wave's first one's, as the one
    before them (one step's first tokens reached the client 0.05-1.01 ms apart in SmolLM2's and tiny's
    calibrations, two steps' 24 ms or more)."""
    from kvviz.serving.record import RequestRecord

    def rec(i: int, sent: float, first_token_at: float | None) -> RequestRecord:
        ttft = None if first_token_at is None else first_token_at - sent
        return RequestRecord(i, sent, 384, 8, ttft_s=ttft, e2e_s=None if ttft is None else ttft + 1,
                             error="HTTP 500" if ttft is None else None)

    records = (rec(0, 0.0006, 7.8206), rec(1, 0.0018, 7.8205), rec(2, 0.0020, 1.3355), rec(3, 0.0026, 7.8203),
               # 57 ms later: a wave whose first step took three, the failed request last
               rec(4, 0.0600, 9.0000), rec(5, 0.0601, 9.0002), rec(6, 0.0602, None), rec(7, 0.0603, 9.0001),
               # 29.7 ms later: another, the second sent a step after the other two (2.6 ms: not one step)
               rec(8, 0.0900, 12.0), rec(9, 0.0901, 12.0026), rec(10, 0.0902, 12.0024),
               rec(11, 0.2000, None), rec(12, 0.2001, None))  # a wave that failed whole: as sent, none joined
    measured = Measured(LoadPoint(Mix(384, 8), 13, concurrency=4), records, None, 0, 0.0)
    order, joined = calibrate.engine_order(measured)
    assert order == [2, 3, 1, 0, 4, 7, 5, 6, 8, 10, 9, 11, 12]
    assert joined == (False, False, False, False, False, True, True, False, False, True, False, False, False)


def test_a_ttft_row_counts_as_one_steps_mean_and_a_gap_row_as_one_step():
    """One request at a time, 600 prompt tokens and 3 out, on a budget of 256 tokens a step: its prefill takes 3
    steps (256, 256, 88 tokens), its first token comes at the third, so its TTFT row spans 3 steps and weighs
    1/3² = 1/9; each of its 2 gaps spans one decode step of one request and weighs 1. (Weighted 1, the TTFT row
    would count 9 times a step.)"""
    point = LoadPoint(Mix(600, 3), 2, concurrency=1)
    measured = _measured(point, TRUE)
    rows = calibrate.Rows()
    calibrate.load_rows(measured, replay(point, ENGINE, TRUE), [0, 1], rows)
    assert rows.kind == [calibrate.TTFT, calibrate.GAP, calibrate.GAP] * 2
    assert [x[0] for x in rows.x] == [3.0, 1.0, 1.0] * 2
    assert [x[1] for x in rows.x] == [600.0, 0.0, 0.0] * 2
    assert rows.w == pytest.approx([1 / 9, 1.0, 1.0] * 2)


def _view(ttft_mean_s: float | None) -> ServerView:
    return ServerView(None, ttft_mean_s, None, None, None, None, None, None, None, None, None, None)


def test_the_front_end_is_the_client_ttft_less_the_engines_over_the_closed_loops():
    """Closed loops of 6 and 12 requests: client TTFT means 50 and 120 ms, vLLM's 40 and 100: (10 x 6 + 20 x 12)
    / 18 = 16.7 ms; the open loop (1 s against 0) does not count; a closed loop without vLLM's figure: None; a
    client faster than the engine's clock (it cannot be, but the clocks differ): 0, not below."""
    def run(point, client, engine):
        m = _measured(point, TRUE)
        stats = replace(m.stats, ttft=replace(m.stats.ttft, mean=client))
        return replace(m, stats=stats, server=_view(engine))
    closed6, closed12 = LoadPoint(Mix(40, 20), 6, concurrency=2), LoadPoint(Mix(40, 20), 12, concurrency=4)
    opened = LoadPoint(Mix(40, 20), 6, rate=5.0)
    runs = [run(closed6, 0.050, 0.040), run(closed12, 0.120, 0.100), run(opened, 1.0, 0.0)]
    assert calibrate.front_end_s(runs) == pytest.approx((0.010 * 6 + 0.020 * 12) / 18)
    assert calibrate.front_end_s([*runs, run(closed6, 0.05, None)]) is None
    assert calibrate.front_end_s([run(closed6, 0.040, 0.050)]) == 0.0


def test_the_fit_takes_the_measured_front_end_and_the_steps_stay_right():
    """TTFTs 12 ms longer than the steps, and vLLM's clock putting the front end at 12 ms too (its TTFT the steps'
    alone): the overhead is the measured 12 ms and the step time comes back. Told 5 ms instead, the fit keeps the
    5 ms it was told (not a fifth unknown), and only the TTFT rows are left 7 ms over."""
    def with_engine(m: Measured, front: float) -> Measured:
        return replace(m, server=_view(m.stats.ttft.mean - front))
    runs = [_measured(p, TRUE, 0.012) for p in LOADS]
    fitted = fit_runs([with_engine(m, 0.012) for m in runs], ENGINE)
    assert fitted.request_overhead_s == pytest.approx(0.012, rel=1e-9)
    for got, true in zip(fitted.step.coefficients(), TRUE.coefficients(), strict=True):
        assert got == pytest.approx(true, rel=1e-6)
    told = fit_runs([with_engine(m, 0.005) for m in runs], ENGINE)
    assert told.request_overhead_s == pytest.approx(0.005, rel=1e-9)
    assert fit_runs(runs, ENGINE, measured_front_end=False).request_overhead_s == pytest.approx(0.012, rel=1e-6)


def test_the_fit_holds_no_coefficient_below_zero():
    """Gaps that fall with the attention pairs (an impossible cost; every step still positive, the most pairs in a
    step 34,832 taking 7 of its 30 ms) leave d at 0, not negative."""
    falling = LinearStepTime(a=0.02, b=4e-5, c=2e-4, d=-2e-7)
    fitted = fit_runs([_measured(p, falling) for p in LOADS], ENGINE)
    assert min(fitted.step.coefficients()) >= 0.0 and fitted.step.d == 0.0


def test_nonnegative_least_squares_worked_by_hand():
    """y = (2, -3) on the unit basis: unconstrained (2, -3); with both >= 0, (2, 0). Columns (1,1,0) and (0,1,1)
    with y = (1, 0, -1): the normal equations [[2,1],[1,2]] b = (1, -1) give (1, -1); non-negative, the first
    column alone: (1, 0, -1)·(1, 1, 0) / 2 = 1/2 (the second alone would be -1/2)."""
    import numpy as np

    assert list(nonnegative_lstsq(np.eye(2), np.array([2.0, -3.0]))) == [2.0, 0.0]
    got = nonnegative_lstsq(np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]), np.array([1.0, 0.0, -1.0]))
    assert list(got) == pytest.approx([0.5, 0.0])


def test_the_staged_fit_takes_a_steps_fixed_and_per_decode_cost_from_its_decode_rows_by_hand():
    """Decode gaps of 1-8 sequences (no prompt token, no attention pair) at 4 ms + 0.5 ms a sequence, exactly;
    prompt steps of 500-3,000 tokens at 2 ms + 0.1 ms a token + 10 ns a pair (k(k+1)/2 pairs), which no one
    intercept fits alongside. The decode rows alone lie on a line: a = 4 ms, c = 0.5 ms, whatever the prompt rows
    say; the prompt rows then give b and d less those 4 ms: each row 2 ms short of b·k + d·pairs, a least-squares
    trade between them, both positive. Fitted at once, the prompt rows (up to 0.35 s against 4-8 ms) pull the
    intercept off 4 ms."""
    import numpy as np

    n = np.arange(1.0, 9.0)
    k = np.array([500.0, 1000.0, 2000.0, 3000.0])
    pairs = k * (k + 1) / 2
    x = np.vstack([np.column_stack([np.ones(8), np.zeros(8), n, np.zeros(8)]),
                   np.column_stack([np.ones(4), k, np.zeros(4), pairs])])
    y = np.concatenate([4e-3 + 5e-4 * n, 2e-3 + 1e-4 * k + 1e-8 * pairs])
    w = np.ones(12)
    coef, keep = calibrate.staged_fit(x, y, w)
    assert keep.all()
    assert coef[0] == pytest.approx(4e-3, rel=1e-9) and coef[2] == pytest.approx(5e-4, rel=1e-9)
    assert coef[1] > 0 and coef[3] > 0
    joint, _ = calibrate.fit_setting_aside(x, y, w)
    assert abs(joint[0] - 4e-3) > 1e-4  # what the stages change


def test_the_staged_fit_keeps_the_joint_fit_when_decode_rows_cannot_tell_a_from_c():
    """Decode rows of one batch size (every gap 2 sequences) cannot tell a step's fixed cost from a sequence's:
    the fit at once stands."""
    import numpy as np

    x = np.array([[1.0, 0, 2, 0], [1.0, 0, 2, 0], [1.0, 100, 0, 5050], [1.0, 300, 0, 45150], [1.0, 200, 1, 20100]])
    y = np.array([5e-3, 5.2e-3, 0.02, 0.05, 0.04])
    w = np.ones(5)
    assert list(calibrate.staged_fit(x, y, w)[0]) == list(calibrate.fit_setting_aside(x, y, w)[0])


def test_a_stall_is_set_aside_worked_by_hand():
    """y = 2 + 3x at x = 1..10, ten times over (100 rows, 5 to 32), one row at x = 4 (14) taking 5,000 instead:
    the plain fit's constant rises by about 5,000 / 100 = 50, so that row is still over 50 times its fitted time
    (5,000 / ~64) and is set aside, and the fit is exact on the rest, whatever the weights. A row 20 times its
    fitted time (x = 5, 340 for 17) is a slow step, not a stall, and stays: the fit is then plain least squares
    on every row (numpy's, which the code under test must equal)."""
    import numpy as np

    xs = np.tile(np.arange(1.0, 11.0), 10)
    x = np.column_stack([np.ones(100), xs])
    y = 2 + 3 * xs
    y[3] = 5000.0
    for w in (np.ones(100), np.linspace(0.2, 1.0, 100)):
        coef, keep = calibrate.fit_setting_aside(x, y, w)
        assert list(coef) == pytest.approx([2.0, 3.0]) and list(np.flatnonzero(~keep)) == [3]
    slow = 2 + 3 * xs
    slow[4] = 340.0
    coef, keep = calibrate.fit_setting_aside(x, slow, np.ones(100))
    assert keep.all() and list(coef) == pytest.approx(list(np.linalg.lstsq(x, slow, rcond=None)[0]))


def _stalled(m: Measured, request: int, token: int, stall_s: float) -> Measured:
    """The load with one request's tokens from `token` on stall_s late (the engine's process stalled once)."""
    r = m.records[request]
    arrivals = tuple(t + (stall_s if k >= token else 0.0) for k, t in enumerate(r.arrivals_s))
    records = list(m.records)
    records[request] = replace(r, arrivals_s=arrivals, e2e_s=r.e2e_s + stall_s)
    return replace(m, records=tuple(records))


def test_a_stall_in_a_calibration_load_leaves_the_step_time_as_it_was(monkeypatch):
    """Gaps made by TRUE's step time, one of them 2 s long (a stall of the engine's process, as tiny showed in a
    load's first run): the fit gives TRUE back and says it set one row aside. Fitted without setting rows aside,
    that one gap moves the per-step constant by over 10% (it is the only unknown every gap row holds)."""
    runs = [_measured(p, TRUE, 0.012) for p in LOADS]
    runs[1] = _stalled(runs[1], request=3, token=10, stall_s=2.0)
    fitted = fit_runs(runs, ENGINE)
    for got, true in zip(fitted.step.coefficients(), TRUE.coefficients(), strict=True):
        assert got == pytest.approx(true, rel=1e-6)
    assert fitted.fit.set_aside == 1 and fitted.fit.residual_max_s < 1e-9
    monkeypatch.setattr(calibrate, "STALL_RATIO", float("inf"))
    plain = fit_runs(runs, ENGINE)
    assert plain.fit.set_aside == 0 and abs(plain.step.a / TRUE.a - 1) > 0.1


def _calibration(tmp_path, device: str, config_sha256: str) -> str:
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({
        "format": "kvviz.sim.step_time/2", "kind": "linear", "units": "seconds",
        "coefficients": {"a": 0.5, "b": 0.0, "c": 0.0, "d": 0.0}, "model": "tiny", "device": device,
        "model_info": {"name": "tiny", "config_sha256": config_sha256}, "request_overhead_s": 0.25}))
    return str(path)


PREDICT = ["predict", "--model", str(REPO / "assets" / "tiny"), "--kv-space-gib", "0.1", "--concurrency", "1",
           "--requests", "1", "--output-tokens", "3", "--prompt-tokens", "4", "--lang", "en"]


def test_a_calibration_of_another_device_is_refused_in_one_line(tmp_path, capsys):
    cal = _calibration(tmp_path, "Some Other CPU, 64 CPUs", calibrate.config_sha256(REPO / "assets" / "tiny"))
    assert main([*PREDICT, "--calibration", cal]) == 2
    assert capsys.readouterr().err == (f"error: {cal} was calibrated for device Some Other CPU, 64 CPUs, not "
                                       f"{calibrate.device_id()}\n")


def test_a_calibration_of_another_config_of_the_same_name_is_refused(tmp_path, capsys):
    cal = _calibration(tmp_path, calibrate.device_id(), "ab" * 32)
    assert main([*PREDICT, "--calibration", cal]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {cal} was calibrated for model config abababababab, not ") and err.count("\n") == 1


def test_a_model_that_is_no_folder_beside_a_calibration_of_its_name_is_refused_in_one_line(tmp_path, capsys,
                                                                                           monkeypatch):
    """`--model tiny` (a name, not a folder) with a calibration made for tiny on this device: the file's own checks
    pass (its model is named tiny), and the model's config is then looked for in a folder that is not there: one
    line saying so, not a traceback."""
    cal = _calibration(tmp_path, calibrate.device_id(), calibrate.config_sha256(REPO / "assets" / "tiny"))
    monkeypatch.chdir(tmp_path)
    args = [a if a != str(REPO / "assets" / "tiny") else "tiny" for a in PREDICT]
    assert main([*args, "--calibration", cal]) == 2
    assert capsys.readouterr().err == "error: tiny is not a model folder (no config.json in it)\n"


def test_predict_adds_the_calibrations_request_overhead(tmp_path, capsys):
    """Steps of 0.5 s: the first token after one step (0.5 s), three tokens by 1.5 s; the file's 0.25 s of
    request overhead makes TTFT 0.75 s and E2E 1.75 s, and leaves TPOT at 0.5 s."""
    cal = _calibration(tmp_path, calibrate.device_id(), calibrate.config_sha256(REPO / "assets" / "tiny"))
    assert main([*PREDICT, "--calibration", cal, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)["stats"]
    assert stats["ttft_p50_s"] == pytest.approx(0.75) and stats["e2e_p50_s"] == pytest.approx(1.75)
    assert stats["tpot_p50_s"] == pytest.approx(0.5)


@pytest.mark.parametrize(("concurrency", "preemptions"), [(2, 0), (3, 1), (4, 2)])
def test_the_engine_leaves_out_vllms_null_block(concurrency, preemptions):
    """vLLM's pool of 6 blocks hands out 5 (block 0 is its null block). A request of 100 + 100 tokens holds one
    block of 128 for its prompt and two from its 129th token: 2 together need 4 (no preemption); 3 need 6, so the
    last is preempted once and recomputes alone; 4 need 8: the 4th, then the 3rd, are preempted, and the two resume
    together (4 blocks). vLLM measured 0, 1 and 2 (results/simulator, the preemption sweep)."""
    engine = Engine("tiny", "0" * 64, 256, 6, 128, 128, 2048, 1, 6)
    assert engine.scheduler().num_blocks == 5
    point = LoadPoint(Mix(100, 100), concurrency, concurrency=concurrency)
    result = replay(point, engine, TRUE)
    assert sum(s.preemptions for s in result.trace) == preemptions


def _joined(m: Measured, client_ttft_extra_s: float) -> Measured:
    """The load as a front end that fell behind the engine delivers it: every request's chunks read at once, at its
    last token's time (gaps 0, TTFT = E2E), each request's TTFT client_ttft_extra_s later still."""
    records = tuple(replace(r, arrivals_s=(r.e2e_s + client_ttft_extra_s,) * len(r.arrivals_s),
                            ttft_s=r.e2e_s + client_ttft_extra_s, joined_chunks=len(r.arrivals_s) - 1)
                    for r in m.records)
    stats = replace(m.stats, ttft=replace(m.stats.ttft, mean=m.stats.ttft.mean + 0.1))
    return replace(m, records=records, stats=stats)


def test_a_share_of_joined_chunks_counted_over_the_loads_requests():
    """Two requests of 4 chunks, one with 2 joined to a later one and one with none: 2 of 8."""
    m = _measured(LOADS[0], TRUE)
    one, two = m.records[:2]
    records = (replace(one, arrivals_s=(0.1, 0.2, 0.2, 0.2), joined_chunks=2),
               replace(two, arrivals_s=(0.1, 0.2, 0.3, 0.4)))
    assert calibrate.joined_share(replace(m, records=records)) == pytest.approx(2 / 8)
    assert calibrate.engine_paced(replace(m, records=records)) is False
    assert calibrate.engine_paced(m) is True  # the replay's own tokens: one a step, none joined


def test_a_load_the_front_end_paced_is_left_out_of_the_fit_and_the_overhead():
    """The loop of 4 delivered in bursts (every chunk joined, its TTFTs 100 ms late by the client's clock and not
    by vLLM's): the fit on the four loads gives back the step time and the 12 ms overhead the other three were
    made with, and names the loop of 4 as paced by the front end. Fitted with it (as before the rule), its zero gaps
    and late TTFTs would have bent both."""
    def with_engine(m: Measured) -> Measured:
        return replace(m, server=_view(m.stats.ttft.mean - 0.012))
    runs = [with_engine(_measured(p, TRUE, 0.012)) for p in LOADS]
    runs[1] = _joined(runs[1], 0.1)
    fitted = fit_runs(runs, ENGINE)
    assert fitted.request_overhead_s == pytest.approx(0.012, rel=1e-9)
    for got, true in zip(fitted.step.coefficients(), TRUE.coefficients(), strict=True):
        assert got == pytest.approx(true, rel=1e-6)
    assert fitted.residuals_by_load[LOADS[1].label]["front_end_paced"] is True
    assert "front_end_paced" not in fitted.residuals_by_load[LOADS[0].label]
    with pytest.raises(calibrate.InputError) as caught:
        fit_runs([_joined(m, 0.1) for m in runs], ENGINE)
    assert caught.value.key == "sim.front_end_bound"


def test_a_paced_load_is_kept_when_the_others_alone_cannot_be_fitted():
    """The loop of one of 40/20 alone cannot tell the coefficients apart (every prompt 40 tokens: a prefill token's
    cost is the TTFT's, the overhead's, alike), so the prompt-heavy load the front end paced is kept in the fit,
    named as paced and kept, rather than the calibration failing (as `validate --quick` did on a busy machine); the
    overhead still from the loop of one alone, 12 ms."""
    def with_engine(m: Measured) -> Measured:
        return replace(m, server=_view(m.stats.ttft.mean - 0.012))
    one = with_engine(_measured(LOADS[0], TRUE, 0.012))
    paced = _joined(with_engine(_measured(LOADS[2], TRUE, 0.012)), 0.1)
    with pytest.raises(calibrate.InputError) as caught:
        fit_runs([one], ENGINE)
    assert caught.value.key == "sim.fit_rows"
    fitted = fit_runs([one, paced], ENGINE)
    assert fitted.residuals_by_load[LOADS[2].label]["front_end_paced"] is True
    assert fitted.residuals_by_load[LOADS[2].label]["kept"] is True
    assert "kept" not in fitted.residuals_by_load[LOADS[0].label]
    assert fitted.request_overhead_s == pytest.approx(0.012, rel=1e-9)


def _engine_clock(point: LoadPoint, front_s: float, return_s: float | None = None,
                  model: LinearStepTime = TRUE) -> Measured:
    """The load replayed on `model` (TRUE), with vLLM's own figures as its /metrics would give them: each request's
    prefill time (its first token's time less the start of the first step it ran in: a prompt of 300 that the
    budget of 256 held back waits steps before it), its decode time (last token less first), its TTFT; and the client's
    TTFTs front_s later; a closed loop's next request reaching the engine return_s after one ends (front_s if
    None)."""
    return_s = front_s if return_s is None else return_s
    sim = replay(point, ENGINE, model, detail=True, return_s=return_s)
    starts = {}
    for step, detail in enumerate(sim.details):
        for seq in detail.running:
            starts.setdefault(seq.index, sim.trace[step].start_s)
    done = [(i, r) for i, r in enumerate(sim.records) if r.ok]
    prefill = sum(r.sent_s + r.ttft_s - starts[i] for i, r in done) / len(done)
    decode = sum(r.arrivals_s[-1] - r.arrivals_s[0] for _, r in done) / len(done)
    m = _measured(point, model, front_s, return_s=return_s)
    return replace(m, server=ServerView(len(done), m.stats.ttft.mean - front_s, 0.0, prefill, decode,
                                        None, None, None, None, None, None, None))


def test_when_the_front_end_paced_every_load_the_fit_is_on_vllms_own_clock():
    """Every load delivered in bursts (gaps 0, TTFTs late by 100 ms more), as the three loads of `validate --quick`
    came on a busy CI machine: the client's times say nothing of the steps, but vLLM's mean prefill and decode
    times (the engine's timestamps) still do, and the fit on them gives back the step time that made them (the
    prompts of 300 in chunks of 256: prefills of two steps) and the overhead the client's TTFT less vLLM's, 12 +
    100 ms; the calibration says its clock was the engine's. Without vLLM's prefill and decode figures, refused.
    The loop of 3 prompts of 300 queues (the budget of 256 takes one at a time), which a prefill counted from the
    request's sending would take for steps' time. The client sees each request's end 112 ms after the engine
    ended it, so a closed loop's next request reaches the engine that long after."""
    runs = [_joined(_engine_clock(p, 0.012, return_s=0.112), 0.1) for p in LOADS]
    fitted = fit_runs(runs, ENGINE)
    for got, true in zip(fitted.step.coefficients(), TRUE.coefficients(), strict=True):
        assert got == pytest.approx(true, rel=1e-6)
    assert fitted.request_overhead_s == pytest.approx(0.112, rel=1e-9)
    assert fitted.clock == calibrate.ENGINE_CLOCK
    load = fitted.residuals_by_load[LOADS[2].label]
    assert load["engine_clock"] is True and load["front_end_paced"] is True
    assert load["decode_residual_s"] == pytest.approx(0.0, abs=1e-9)
    assert fit_runs([_measured(p, TRUE, 0.012) for p in LOADS], ENGINE).clock == calibrate.CLIENT_CLOCK
    with pytest.raises(calibrate.InputError) as caught:
        fit_runs([replace(m, server=_view(m.server.ttft_mean_s)) for m in runs], ENGINE)
    assert caught.value.key == "sim.front_end_bound"


def test_a_paced_load_with_vllms_figures_is_fitted_by_vllms_clock_beside_the_others():
    """The loop of one delivered in bursts (its gaps 0, its TTFTs 100 ms late by the client's clock), the others
    not: the loop of one's rows are vLLM's mean prefill and decode times, the others' the client's gaps and TTFTs,
    and the fit gives back the step time and the 12 ms overhead of the three the engine paced (the loop of one's
    late client TTFTs stay out of it). The loop of one alone tells a step's fixed cost from a decode's (its steps
    hold one decode); left out, as before, on tiny-sliding it put the whole step in the decode term."""
    runs = [_engine_clock(p, 0.012) for p in LOADS]
    runs[0] = _joined(runs[0], 0.1)
    fitted = fit_runs(runs, ENGINE)
    for got, true in zip(fitted.step.coefficients(), TRUE.coefficients(), strict=True):
        assert got == pytest.approx(true, rel=1e-6)
    assert fitted.request_overhead_s == pytest.approx(0.012, rel=1e-9)
    assert fitted.clock == calibrate.MIXED_CLOCK
    assert fitted.residuals_by_load[LOADS[0].label]["engine_clock"] is True
    assert "engine_clock" not in fitted.residuals_by_load[LOADS[1].label]


def test_the_calibration_says_which_loads_it_left_out_and_when_it_used_vllms_clock():
    """`calibrate`'s lines: the loop of 4 paced by the front end, with vLLM's figures, is named as fitted by vLLM's
    clock; without them, as left out; when every load was paced, the fit says it used vLLM's own clock and names
    none as left out (all were fitted); in English and in Chinese."""
    from kvviz.sim.cli import fit_lines

    runs = [_engine_clock(p, 0.012) for p in LOADS]
    by_clock = fit_lines(fit_runs([runs[0], _joined(runs[1], 0.1), *runs[2:]], ENGINE), "en")
    assert [line for line in by_clock if "own clock" in line] == [
        f"1 closed loads fitted by vLLM's own clock (their mean prefill and decode times): vLLM's API server fell "
        f"behind the engine in them (their tokens came in bursts): {LOADS[1].label}"]
    assert not any("left out" in line for line in by_clock)
    without = replace(runs[1], server=_view(runs[1].server.ttft_mean_s))
    lines = fit_lines(fit_runs([runs[0], _joined(without, 0.1), *runs[2:]], ENGINE), "en")
    assert [line for line in lines if "left out" in line] == [
        f"1 closed loads left out of the fit: vLLM's API server fell behind the engine in them (their tokens came in "
        f"bursts): {LOADS[1].label}"]
    assert not any("own clock" in line for line in lines)
    every = fit_runs([_joined(m, 0.1) for m in runs], ENGINE)
    lines = fit_lines(every, "en")
    assert any("fitted on vLLM's own clock instead" in line for line in lines)
    assert not any("left out" in line for line in lines)
    assert any("vLLM 自己的时钟" in line for line in fit_lines(every, "zh"))
    assert fit_lines(every, "zh") != lines


def test_the_calibration_file_says_where_vllms_worker_computed(tmp_path, monkeypatch):
    """The file records the choice kvviz's server start follows (VLLM_ENABLE_V1_MULTIPROCESSING; 0: the worker
    computes in vLLM's engine core process), with each load's figures as measured."""
    from kvviz.serving.vllm import IN_ENGINE_ENV

    runs = [_measured(p, TRUE, 0.012) for p in LOADS]
    fitted = fit_runs(runs, ENGINE)
    for value, in_engine in (("0", True), ("1", False)):
        monkeypatch.setenv(IN_ENGINE_ENV, value)
        record = calibrate.calibration_json(fitted, ENGINE, runs, tmp_path)
        assert record["device_info"]["vllm_worker_in_engine_core"] is in_engine
        assert record["device_info"]["vllm_version"] is None  # no vLLM in tmp_path
        assert [(row["load"], row["measured_tpot_p50_s"]) for row in record["inputs"]] == [
            ("closed 1, 40/20 x6", runs[0].stats.tpot.p50), ("closed 4, 40/20 x12", runs[1].stats.tpot.p50),
            ("closed 3, 300/8 x8", runs[2].stats.tpot.p50), ("closed 8, 40/20 x16", runs[3].stats.tpot.p50)]


def test_the_front_end_alone_is_vllms_ttft_less_its_queue_and_prefill_on_the_loops_of_one():
    """Loops of one of 4 and 8 requests, vLLM's TTFT / queue / prefill means 10 / 0.5 / 6.5 ms and 9 / 0 / 7 ms:
    front ends of 3 and 2 ms, (3 x 4 + 2 x 8) / 12 = 2.33 ms; a loop of 4 in flight (20 ms less 5) and an open loop
    do not count; none left: None; vLLM's figure missing on the only loop of one: None."""
    def run(point, ttft, queue, prefill):
        return replace(_measured(point, TRUE), server=ServerView(point.requests, ttft, queue, prefill, None, None,
                                                                  None, None, None, None, None, None))
    one4, one8 = LoadPoint(Mix(40, 20), 4, concurrency=1), LoadPoint(Mix(40, 20), 8, concurrency=1)
    four, opened = LoadPoint(Mix(40, 20), 8, concurrency=4), LoadPoint(Mix(40, 20), 6, rate=5.0)
    runs = [run(one4, 0.010, 0.0005, 0.0065), run(one8, 0.009, 0.0, 0.007), run(four, 0.020, 0.0, 0.005),
            run(opened, 0.030, 0.0, 0.005)]
    assert calibrate.front_alone_s(runs) == pytest.approx((0.003 * 4 + 0.002 * 8) / 12)
    assert calibrate.front_alone_s(runs[2:]) is None
    assert calibrate.front_alone_s([run(one4, None, 0.0, 0.005)]) is None


def _front_end_queue(point: LoadPoint, http_s: float, alone_s: float, per_other_s: float) -> Measured:
    """A load made by TRUE's steps, each closed loop's next request reaching the engine http_s + alone_s after one
    ends, and a front end that, before a request reaches vLLM's engine core, takes alone_s plus per_other_s for each
    other request in flight (a closed loop's wave queuing in vLLM's API server): time on every TTFT, vLLM's own
    and the client's (http_s more), that the engine's steps do not hold; vLLM's prefill times are the steps'."""
    m = _engine_clock(point, http_s + alone_s)
    extra = alone_s + per_other_s * (point.concurrency - 1)
    records = tuple(replace(r, ttft_s=r.ttft_s + extra - alone_s, e2e_s=r.e2e_s + extra - alone_s)
                    for r in m.records)
    engine_ttft_s = m.stats.ttft.mean  # _measured's statistics are the replay's own
    stats = replace(m.stats, ttft=replace(m.stats.ttft, mean=engine_ttft_s + extra + http_s))
    return replace(m, records=records, stats=stats, server=replace(m.server, ttft_mean_s=engine_ttft_s + extra))


def test_a_front_end_that_queues_under_load_leaves_the_prompts_cost_to_vllms_clock():
    """TTFTs longer by a front end's time that grows with the requests in flight (2 ms alone, 3 ms more for each
    other request; vLLM's TTFT holds it, its prefill time does not): with vLLM's figures and a loop of one, the fit
    takes the prompts' cost from vLLM's prefill times and gives TRUE back, the overhead the HTTP's 4 ms plus the
    front end's 2 ms alone; by the client's TTFTs (vLLM's prefill figure gone) the per-prompt-token cost b comes out
    far above TRUE's, carrying the queue (as tiny's did on a 2-core Xeon: 24.6 µs a token against 17-18)."""
    runs = [_front_end_queue(p, 0.004, 0.002, 0.003) for p in LOADS]
    fitted = fit_runs(runs, ENGINE)
    for got, true in zip(fitted.step.coefficients(), TRUE.coefficients(), strict=True):
        assert got == pytest.approx(true, rel=1e-6)
    assert fitted.request_overhead_s == pytest.approx(0.006, rel=1e-9)
    assert fitted.front_alone_s == pytest.approx(0.002, rel=1e-9)
    assert fitted.residuals_by_load[LOADS[2].label]["prefill_residual_s"] == pytest.approx(0.0, abs=1e-9)
    assert fitted.residuals_by_load[LOADS[2].label]["ttft_rows"] == 0
    by_client = fit_runs([replace(m, server=replace(m.server, prefill_mean_s=None)) for m in runs], ENGINE)
    assert by_client.front_alone_s is None
    assert by_client.step.b > 1.5 * TRUE.b


def test_prompts_alone_set_b_and_d_and_the_waves_their_cost_together():
    """Prompts of 100 and 300 tokens computed alone (loops of one, vLLM's prefill time their steps'), beside loads
    made with e = 3e-8 s a pair of two requests' prompt tokens: the fit gives all five back. Then vLLM's mean
    prefill time of the loop of 3 at 300/8 half as long again as its steps (a wave's race to the engine's first
    steps, as tiny's loop of 6 at 384/8 took 32 ms in one start and 61 in another): a, b, c and d still come back,
    from the decode gaps and the prompts alone, the wave's extra time going to e; fitted without the prompts alone,
    b or d moves off by more than a tenth."""
    bent = replace(TRUE, e=3e-8)
    runs = [_engine_clock(p, 0.012, model=bent) for p in LOADS]
    alone = [_engine_clock(LoadPoint(Mix(p, 8), 3, concurrency=1), 0.012, model=bent) for p in (100, 300)]
    fitted = fit_runs(runs + alone, ENGINE)
    for got, true in zip(fitted.step.coefficients(), bent.coefficients(), strict=True):
        assert got == pytest.approx(true, rel=1e-6)
    slow = replace(runs[2].server, prefill_mean_s=1.5 * runs[2].server.prefill_mean_s)
    raced = [*runs[:2], replace(runs[2], server=slow), *runs[3:]]
    fitted = fit_runs(raced + alone, ENGINE)
    for name in "abcd":
        assert getattr(fitted.step, name) == pytest.approx(getattr(bent, name), rel=1e-6), name
    assert fitted.step.e > bent.e
    every_row = fit_runs(raced, ENGINE).step
    assert abs(every_row.b / bent.b - 1) > 0.1 or abs(every_row.d / bent.d - 1) > 0.1


def test_a_request_whose_tokens_came_two_to_a_chunk_gives_one_row_of_its_decode():
    """Every request of the loop of 8 with its 6th and 7th tokens in one chunk (19 chunks for 20 tokens, the
    chunk at the 7th's time): its chunks cannot be matched to its steps one by one, but its decode, last chunk less
    first, is all its steps after the first token's: one row each (16), the fit exact as before; dropped, they took
    the whole load's gaps with them."""
    runs = [_measured(p, TRUE, 0.012) for p in LOADS]
    merged = tuple(replace(r, arrivals_s=r.arrivals_s[:5] + r.arrivals_s[6:]) for r in runs[3].records)
    runs[3] = replace(runs[3], records=merged)
    fitted = fit_runs(runs, ENGINE)
    for got, true in zip(fitted.step.coefficients(), TRUE.coefficients(), strict=True):
        assert got == pytest.approx(true, rel=1e-6)
    row = fitted.residuals_by_load[LOADS[3].label]
    assert (row["span_rows"], row["gap_rows"]) == (16, 0)
    assert fitted.fit.residual_max_s < 1e-9
