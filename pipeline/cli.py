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
    run.add_argument("--snapshot", metavar="DIGEST",
                     help="train on this published dataset snapshot (a digest or unique prefix)")
    snaps = sub.add_parser("snapshots", help="dataset snapshots")
    snaps.add_argument("action", choices=["list"])
    _add_config_args(snaps)
    lineage = sub.add_parser("lineage", help="which snapshot, data checks, config and code made a model")
    lineage.add_argument("model", metavar="VERSION_OR_MODEL_ID",
                         help="a pushed version (directory name under the serving dir) or a Model artifact id")
    _add_config_args(lineage)
    return parser


def cmd_run(config) -> int:
    from pipeline.local_runner import PipelineFailed, run_local

    try:
        summary = run_local(config)
    except PipelineFailed as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK if summary.pushed_path else EXIT_NOT_PUSHED


def cmd_snapshots(config, args) -> int:
    from pipeline.snapshots import format_list, list_snapshots

    print(format_list(list_snapshots(config.snapshots_root)))
    return EXIT_OK


def cmd_lineage(config, args) -> int:
    from pipeline.lineage import LineageError, cmd_lineage

    try:
        print(cmd_lineage(config, args.model))
    except LineageError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _pin_snapshot(args) -> list[str]:
    """--snapshot <prefix> becomes --set snapshot.digest=<full digest>."""
    if not getattr(args, "snapshot", None):
        return args.set
    from pipeline.snapshots import SnapshotError, resolve_digest

    root = load_config(args.config, args.set).snapshots_root
    try:
        return [*args.set, f"snapshot.digest={resolve_digest(root, args.snapshot)}"]
    except SnapshotError as e:
        raise ConfigError(str(e)) from None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.config, _pin_snapshot(args))
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    if args.command == "run":
        return cmd_run(config)
    return {"snapshots": cmd_snapshots, "lineage": cmd_lineage}[args.command](config, args)
