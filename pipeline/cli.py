"""`python -m pipeline <command>`: the one entry point for people and Make."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys

from pipeline.config import load_config
from pipeline.errors import EXIT_OK, CommandFailed, ConfigError, ProjectError, SnapshotError, exit_code_for


def _add_config_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default="configs/local.yaml", help="YAML config file")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override one config value, e.g. --set trainer.train_steps=200")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pipeline", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the whole pipeline locally (LocalDagRunner)")
    run.add_argument("--snapshot", metavar="DIGEST",
                     help="train on this published dataset snapshot (a digest or unique prefix)")
    run.set_defaults(func=cmd_run)

    report = sub.add_parser("report", help="(re)write a run's report.html and print its path")
    report.add_argument("run", nargs="?", default=None, help="run id, as `history` shows it or as its directory "
                        "under <pipeline.root>/runs/ is named (default: the latest run)")
    report.set_defaults(func=cmd_report)

    snaps = sub.add_parser("snapshots", help="dataset snapshots")
    snaps.add_argument("action", choices=["list"])
    snaps.set_defaults(func=cmd_snapshots)

    lineage = sub.add_parser("lineage", help="which snapshot, data checks, config and code made a model")
    lineage.add_argument("model", metavar="VERSION_OR_MODEL_ID",
                         help="a pushed version (directory name under the serving dir) or a Model artifact id")
    lineage.set_defaults(func=cmd_lineage)

    hist = sub.add_parser("history", help="one row per run: spans, rows, drift, metric, blessed, pushed, serving")
    hist.set_defaults(func=cmd_history)
    simulate = sub.add_parser("simulate", help="scheduled retraining, simulated: write spans, run once per span")
    simulate.add_argument("--spans", type=int, default=6, help="how many spans to write and run")
    simulate.add_argument("--drift-at", type=int, default=4, help="the first span with a real shift (0: none)")
    simulate.add_argument("--rows", type=int, default=170, help="rows per span")
    simulate.add_argument("--seed", type=int, default=0)
    simulate.add_argument("--source", default="data/penguins/penguins.csv", help="flat CSV the spans are drawn from")
    simulate.set_defaults(func=cmd_simulate)

    schema = sub.add_parser("schema", help="infer a schema from the data, for review (the start of a curated one)")
    schema.add_argument("action", choices=["infer"])
    schema.add_argument("-o", "--output", help="where to write it (default: data.schema_file, else "
                        "schema/<pipeline name>.pbtxt)")
    schema.add_argument("--force", action="store_true", help="overwrite an existing file")
    schema.set_defaults(func=cmd_schema)

    predict = sub.add_parser("predict", help="score raw CSV rows with a pushed model (docs/predict.md)")
    predict.add_argument("--input", required=True, metavar="DIR|CSV", help="a directory of CSV files or one CSV")
    predict.add_argument("--output", required=True, metavar="DIR", help="a new or empty directory")
    predict.add_argument("--version", type=int, help="a pushed version (default: the one labelled stable)")
    predict.add_argument("--label", choices=["stable", "canary"],
                         help="the version serving under this label (default: stable; docs/serving.md)")
    predict.add_argument("--format", choices=["csv", "jsonl"], help="default: predict.format")
    predict.add_argument("--runner", choices=["local", "dataflow"], default="local",
                         help="where the Beam job runs: this machine (the beam section) or Dataflow (the "
                              "dataflow section; gs:// input and output)")
    predict.set_defaults(func=cmd_predict)


    serving = sub.add_parser("serving", help="what TF Serving serves under stable and canary; promote or roll back")
    serving.add_argument("action", choices=["status", "promote", "rollback", "check"],
                         help="status: each label's version and record; promote: canary becomes stable; rollback: "
                              "drop the canary, or (none out) make the previous stable stable again; check: decide "
                              "on the recorded TF Serving metrics of both Deployments (serving.check)")
    serving.add_argument("--to", type=int, metavar="VERSION", help="rollback: make this version stable")
    serving.add_argument("--wait", type=float, default=60.0, metavar="SECONDS",
                         help="promote/rollback: wait this long for a run holding the root (default 60)")
    serving.add_argument("--metrics-dir", help="check: the recorded scrapes, <dir>/stable|canary/<unix time>.prom "
                         "(default: <pipeline.root>/serving_metrics)")
    for track in ("stable", "canary"):
        serving.add_argument(f"--{track}-url", metavar="URL", help=f"check: scrape the {track} Deployment's "
                             "/monitoring/prometheus/metrics into --metrics-dir first")
    serving.add_argument("--dry-run", action="store_true", help="check: say what it would do, change nothing")
    serving.add_argument("--dryrun-dir", metavar="DIR", help="act on what `dryrun --local-dir DIR` left: its bucket, "
                         "GCS emulator and endpoint stand-in (docs/serving.md)")
    serving.set_defaults(func=cmd_serving)

    for p in (run, report, snaps, lineage, hist, simulate, schema, predict, serving):
        _add_config_args(p)
    simulate.set_defaults(config="configs/simulate.yaml")  # after --config's own default, to replace it
    _add_vertex_commands(sub)
    _add_dryrun_command(sub)
    return parser


def _add_vertex_commands(sub) -> None:
    # Each goes to the config's pipeline.target: Vertex AI Pipelines or a self-hosted Kubeflow Pipelines.
    compile_ = sub.add_parser("compile", help="write the pipeline spec for pipeline.target (no cloud access)")
    preflight = sub.add_parser("preflight", help="check the target is ready for a run (one line per check)")
    submit = sub.add_parser("submit", help="compile and submit to pipeline.target (Vertex AI or Kubeflow)")
    schedule = sub.add_parser("schedule", help="manage scheduled runs on pipeline.target (Vertex AI or Kubeflow)")
    schedule.add_argument("action", choices=["create", "list", "pause", "resume", "delete"])
    schedule.add_argument("schedule", nargs="?", help="schedule id or resource name (pause/resume/delete)")
    schedule.add_argument("--cron", help="e.g. 'TZ=Europe/Berlin 0 3 * * 1' (create)")
    schedule.add_argument("--display-name", help="default: <pipeline name>-retraining")
    schedule.add_argument("--max-concurrent-runs", type=int, default=1)
    schedule.add_argument("--max-run-count", type=int, help="stop after this many runs")
    schedule.add_argument("--start-time", help="ISO 8601 with zone, e.g. 2027-01-04T03:00:00Z")
    schedule.add_argument("--end-time", help="ISO 8601 with zone")
    submit.add_argument("--wait", action="store_true", help="follow the job; exit 1 unless it succeeds")
    submit.add_argument("--poll-seconds", type=float, default=30.0)
    submit.add_argument("--job-id", help="default: <pipeline name>-<timestamp>")
    for p, name in ((compile_, "compile"), (preflight, "preflight"), (submit, "submit"), (schedule, "schedule")):
        p.set_defaults(func=lambda config, args, name=name: _target_command(name, config, args)(config, args))
        _add_config_args(p)
        p.set_defaults(config="configs/vertex.yaml")
        p.add_argument("-o", "--output", help="compiled spec path (default: output/vertex/pipeline.json, "
                       "or output/kubeflow/pipeline.yaml for pipeline.target kubeflow)")
    preflight.add_argument("--spec", metavar="FILE", help="check this compiled spec (what `compile` wrote) "
                           "instead of compiling the config to --output")
    for p in (submit, schedule):
        p.add_argument("--spec", metavar="FILE", help="send this spec compiled earlier instead of compiling "
                       "(pipeline.target kubeflow)")
    for p in (preflight, submit, schedule):
        p.add_argument("--preflight-endpoint", metavar="URL",
                       help="send the preflight's Google API calls to this local emulator (tests)")
    for p in (submit, schedule):
        p.add_argument("--skip-preflight", action="store_true", help="don't run the preflight checks first")
    for p in (submit, schedule):
        p.add_argument("--api-endpoint", help="Vertex API endpoint, e.g. europe-west4-aiplatform.googleapis.com")
        p.add_argument("--cache", action=argparse.BooleanOptionalAction, default=None,
                       help="turn caching on/off for EVERY task of the run(s), overriding the compiled per-task "
                            "rule (default: the rule; see docs/vertex.md)")


# pipeline.target -> its package. Each has the modules compile (with DEFAULT_OUTPUT), preflight, submit and
# schedules; imported on demand: the cloud client libraries are slow to import and local runs don't need them.
TARGETS = {"vertex": "pipeline.vertex", "kubeflow": "pipeline.kubeflow"}
_TARGET_COMMANDS = {"compile": ("compile", "cmd_compile"), "preflight": ("preflight", "cmd_preflight"),
                    "submit": ("submit", "cmd_submit"), "schedule": ("schedules", "cmd_schedule")}


def _target_command(name: str, config, args):
    target = config.pipeline.target
    if target == "vertex" and name in ("submit", "schedule") and getattr(args, "spec", None):
        raise ConfigError(f"{name} --spec is for pipeline.target kubeflow; Vertex submits what it compiles")
    if getattr(args, "output", "") is None:
        args.output = importlib.import_module(f"{TARGETS[target]}.compile").DEFAULT_OUTPUT
    module, function = _TARGET_COMMANDS[name]
    return getattr(importlib.import_module(f"{TARGETS[target]}.{module}"), function)


def cmd_run(config, args) -> int:
    from pipeline.local.runner import run_local
    from pipeline.runs.summary import exit_code

    return exit_code(run_local(config))


def cmd_report(config, args) -> int:
    from pipeline.runs.report import write_report

    try:
        print(write_report(config, args.run))
    except (LookupError, ValueError) as e:  # no such run, or not a valid run id
        raise CommandFailed(str(e)) from None
    return EXIT_OK


def cmd_snapshots(config, args) -> int:
    from components.data.snapshot.store import format_list, list_snapshots

    print(format_list(list_snapshots(config.snapshots_root)))
    return EXIT_OK


def cmd_schema(config, args) -> int:
    from pipeline.config import resolve
    from pipeline.data.schema_infer import infer_schema

    output = resolve(args.output or config.data.schema_file or f"schema/{config.pipeline.name}.pbtxt")
    path, resolved = infer_schema(config, output, force=args.force)
    print(f"wrote {path}: review it (types, value domains, presence), then set data.schema_file to it")
    if resolved is not None:
        print("features with this schema:\n  " + resolved.describe().replace("\n", "\n  "))
    return EXIT_OK


def cmd_predict(config, args) -> int:
    from pipeline.predict import cmd_predict

    return cmd_predict(config, args)


def cmd_lineage(config, args) -> int:
    from pipeline.runs.lineage import cmd_lineage

    print(cmd_lineage(config, args.model))
    return EXIT_OK


def cmd_history(config, args) -> int:
    from pipeline.runs.history import cmd_history

    print(cmd_history(config))
    return EXIT_OK


def cmd_serving(config, args) -> int:
    from pipeline import serving

    if args.to is not None and args.action != "rollback":
        raise ConfigError(f"--to is for rollback, not {args.action}")
    if args.dryrun_dir is None:
        view = contextlib.nullcontext(config)
    else:
        from pipeline.dryrun.view import command_view

        view = command_view(config, args.dryrun_dir)
    with view as config:
        if args.action == "check":
            from pipeline.serving_check import check

            urls = {"stable": args.stable_url, "canary": args.canary_url}
            print(check(config, args.metrics_dir, urls, apply=not args.dry_run))
        else:
            print(serving.status(config) if args.action == "status"
                  else serving.move(config, args.action, args.to, args.wait))
    return EXIT_OK


def cmd_simulate(config, args) -> int:
    from pipeline.local.simulate import simulate

    return simulate(config, spans=args.spans, drift_at=args.drift_at or None, rows=args.rows, seed=args.seed,
                    source_csv=args.source)


def _add_dryrun_command(sub) -> None:
    dryrun = sub.add_parser("dryrun", help="compile as submit does and run the job on this machine as Vertex would")
    dryrun.add_argument("--runs", type=int, default=1, help="run the job this many times (caching across runs)")
    dryrun.add_argument("--local-dir", help="the mapped bucket and the emulated service's state (runs here build on "
                        "each other; default: output/dryrun)")
    dryrun.add_argument("--backend", choices=["vertex", "kubeflow"],
                        help="run as this backend runs the spec (default: the config's pipeline.target)")
    dryrun.add_argument("--spec", metavar="FILE",
                        help="run this compiled spec (the file `compile` wrote, exactly what submit would send) "
                             "instead of compiling the config again")
    dryrun.add_argument("--fresh-processes", action="store_true",
                        help="start every task process fresh instead of forking it from the fork server "
                             "that imports the tasks' modules once (pipeline/dryrun/forkserver/)")
    dryrun.set_defaults(func=cmd_dryrun)
    _add_config_args(dryrun)
    dryrun.set_defaults(config="configs/vertex.yaml")


def cmd_dryrun(config, args) -> int:
    from pipeline.dryrun.run import cmd_dryrun

    return cmd_dryrun(config, args)


def _pin_snapshot(args) -> list[str]:
    """--snapshot <prefix> becomes --set snapshot.digest=<full digest>."""
    if not getattr(args, "snapshot", None):
        return args.set
    from components.data.snapshot.store import resolve_digest

    root = load_config(args.config, args.set).snapshots_root
    try:
        return [*args.set, f"snapshot.digest={resolve_digest(root, args.snapshot)}"]
    except SnapshotError as e:
        raise ConfigError(str(e)) from None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Commands raise; this is the one place that turns errors into messages and exit codes.
    try:
        config = load_config(args.config, _pin_snapshot(args))
        return args.func(config, args)
    except ProjectError as e:
        code = exit_code_for(e)
        if code is None:
            raise
        print(f"error: {e}", file=sys.stderr)
        return code
