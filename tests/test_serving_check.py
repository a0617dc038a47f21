"""components/serving/canary_check.py on TF Serving's recorded Prometheus scrapes of both Deployments
(components/serving/canary_prometheus.py), and the `serving check` command (pipeline/serving_check.py): promote a canary
that does as well as stable, roll back one that errs or is slow, wait for enough time and traffic."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from components.serving import canary_prometheus, rollout
from components.serving.canary_check import decide as decide_on
from components.serving.canary_prometheus import PrometheusScrapes, parse
from components.serving.model_config import Labels
from pipeline.errors import ConfigError
from pipeline.sections.serving import CheckSection

NAME = "penguin-tpu"
RULES = CheckSection(min_canary_minutes=30, min_requests=100, max_error_rate_increase=0.01,
                     max_latency_ratio=1.5).rules()
T0 = 1_796_000_000.0


def exposition(ok: float, failed: float, latency_ms: float, count: float = None) -> str:
    """A /monitoring/prometheus/metrics page as TF Serving 2.16 writes it for one model (names and labels:
    tensorflow_serving/servables/tensorflow/util.cc; microseconds), with another model's lines to ignore."""
    count = ok + failed if count is None else count
    total_us = latency_ms * 1000 * count
    return f"""# TYPE :tensorflow:serving:request_count counter
:tensorflow:serving:request_count{{model_name="{NAME}",status="OK"}} {ok}
:tensorflow:serving:request_count{{model_name="{NAME}",status="INVALID_ARGUMENT"}} {failed}
:tensorflow:serving:request_count{{model_name="other",status="INVALID_ARGUMENT"}} 99999
# TYPE :tensorflow:serving:request_latency histogram
:tensorflow:serving:request_latency_bucket{{model_name="{NAME}",API="predict",entrypoint="GRPC",le="+Inf"}} {count}
:tensorflow:serving:request_latency_sum{{model_name="{NAME}",API="predict",entrypoint="GRPC"}} {total_us}
:tensorflow:serving:request_latency_count{{model_name="{NAME}",API="predict",entrypoint="GRPC"}} {count}
"""


def decide(directory: Path, name: str, since: float, rules, now: float):
    return decide_on(PrometheusScrapes(directory, name), since, rules, now)


def record(directory: Path, track: str, when: float, text: str) -> None:
    (directory / track).mkdir(parents=True, exist_ok=True)
    (directory / track / f"{int(when)}.prom").write_text(text)


def _window(tmp_path, stable: tuple, canary: tuple, minutes: float = 60) -> Path:
    """Scrapes at the canary's push and `minutes` later: (ok, failed, mean latency ms) at the end; zero at the start."""
    for track, (ok, failed, latency) in (("stable", stable), ("canary", canary)):
        record(tmp_path, track, T0, exposition(0, 0, 1.0, 0))
        record(tmp_path, track, T0 + minutes * 60, exposition(ok, failed, latency))
    return tmp_path


def test_the_page_is_read_per_model_and_status():
    totals = parse(exposition(90, 10, 4.0), NAME)
    assert totals.requests == {"OK": 90, "INVALID_ARGUMENT": 10} and totals.total == 100
    assert totals.latency_us / totals.latency_count == 4000


def test_a_canary_as_good_as_stable_is_promoted(tmp_path):
    decision = decide(_window(tmp_path, (2000, 4, 5.0), (500, 1, 5.5)), NAME, T0, RULES, now=T0 + 3600)
    assert decision.action == "promote" and "501 requests" in decision.why and "0.20%" in decision.why


def test_a_failing_canary_is_rolled_back_saying_why(tmp_path):
    decision = decide(_window(tmp_path, (2000, 4, 5.0), (450, 50, 5.0)), NAME, T0, RULES, now=T0 + 3600)
    assert decision.action == "rollback"
    assert decision.why == "canary error rate 10.00% against stable's 0.20% (allowed +1.00%)"


def test_a_slow_canary_is_rolled_back(tmp_path):
    decision = decide(_window(tmp_path, (2000, 0, 5.0), (500, 0, 9.0)), NAME, T0, RULES, now=T0 + 3600)
    assert decision.action == "rollback" and "mean latency 9.0 ms against stable's 5.0 ms" in decision.why


def test_too_early_or_too_little_traffic_waits(tmp_path):
    window = _window(tmp_path, (2000, 0, 5.0), (50, 50, 5.0))
    early = decide(window, NAME, T0, RULES, now=T0 + 600)  # a failing canary, but only 10 of the 30 minutes out
    assert early.action == "wait" and "out 10 min, fewer than serving.check.min_canary_minutes (30)" in early.why
    assert decide(window, NAME, T0, RULES, now=T0 + 3600).action == "rollback"
    few = decide(_window(tmp_path / "few", (2000, 0, 5.0), (60, 0, 5.0)), NAME, T0, RULES, now=T0 + 3600)
    assert few.action == "wait" and "fewer than serving.check.min_requests (100)" in few.why


def test_a_scrape_is_never_named_later_than_it_was_taken(tmp_path):
    """The check's "now" follows its own scrape by microseconds; a name rounded up past it would hide that scrape."""
    taken = T0 + 0.9996
    canary_prometheus.record(str(tmp_path), "canary", exposition(1, 0, 1.0), taken)
    (when, _), = canary_prometheus.recorded(str(tmp_path), "canary", since=T0)
    assert T0 + 0.999 <= when <= taken


def test_a_restarted_server_counts_from_zero(tmp_path):
    """A counter lower than at the window's start was reset: it counts what came after, as rate() does."""
    record(tmp_path, "stable", T0, exposition(0, 0, 1.0, 0))
    record(tmp_path, "stable", T0 + 3600, exposition(1000, 0, 5.0))
    record(tmp_path, "canary", T0, exposition(5000, 0, 5.0))  # before the restart
    record(tmp_path, "canary", T0 + 3600, exposition(300, 60, 5.0))  # after it: 360 requests, 60 failed
    decision = decide(tmp_path, NAME, T0, RULES, now=T0 + 3600)
    assert decision.action == "rollback" and "16.67%" in decision.why


def test_the_command_scrapes_both_deployments_then_rolls_back_a_failing_canary(tmp_path, capsys):
    from components.serving import serving_dir
    from pipeline.cli import main
    from tests.conftest import CONFIG

    root = tmp_path / "root"
    base = root / "serving_model" / NAME
    for number in (1, 2):
        (base / str(number)).mkdir(parents=True)
        (base / str(number) / serving_dir.SAVED_MODEL).write_text("graph")
        rollout.after_push(str(base), NAME, number, "canary", f"run-{number}")
    pushed = [e for e in rollout.events(str(base)) if e.canary == 2][0]
    since = __import__("calendar").timegm(__import__("time").strptime(pushed.when, "%Y-%m-%dT%H:%M:%SZ"))
    metrics = tmp_path / "metrics"
    for track in ("stable", "canary"):
        record(metrics, track, since, exposition(0, 0, 1.0, 0))
    pages = {"/stable": exposition(3000, 3, 5.0), "/canary": exposition(400, 100, 5.0)}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            body = pages[self.path].encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    args = ["--config", str(CONFIG), "--set", f"pipeline.root={root}", "--set", "serving.check.min_canary_minutes=0",
            "--metrics-dir", str(metrics), "--stable-url", f"{url}/stable", "--canary-url", f"{url}/canary"]
    try:
        assert main(["serving", "check", *args, "--dry-run"]) == 0
        assert "rollback canary 2: canary error rate 20.00%" in capsys.readouterr().out
        assert rollout.labels(str(base)) == Labels(1, 2)  # a dry run changes nothing
        assert main(["serving", "check", *args]) == 0
        assert rollout.labels(str(base)) == Labels(1) and "canary 2 dropped" in capsys.readouterr().out
    finally:
        server.shutdown()
    with pytest.raises(ConfigError, match="plain http is only allowed"):
        from pipeline.serving_check import scrape
        scrape("http://example.com/metrics", metrics, "stable")
