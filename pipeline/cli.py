"""`python -m pipeline <command>`: the one entry point for people and Make."""

from __future__ import annotations

import argparse
import sys

from pipeline.config import ConfigError, load_config

# Exit codes a scheduler or CI can act on.
EXIT_OK, EXIT_FAILED, EXIT_BAD_CONFIG, EXIT_NOT_PUSHED = 0, 1, 2, 3


def _add_config_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default="configs/local.yaml", help="YAML config file")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override one config value, e.g. --set trainer.train_steps=200")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pipeline", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the whole pipeline locally (LocalDagRunner)")
    _add_config_args(run)
    report = sub.add_parser("report", help="(re)write a run's report.html and print its path")
    report.add_argument("run", nargs="?", default=None, help="run id (default: the latest run)")
    _add_config_args(report)
    return parser


def cmd_run(config) -> int:
    from pipeline.local_runner import PipelineFailed, run_local

    try:
        summary = run_local(config)
    except PipelineFailed as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK if summary.pushed_path else EXIT_NOT_PUSHED


def cmd_report(config, run_id) -> int:
    from pipeline.report import write_report

    try:
        print(write_report(config, run_id))
    except (LookupError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.config, args.set)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    if args.command == "report":
        return cmd_report(config, args.run)
    return {"run": cmd_run}[args.command](config)
