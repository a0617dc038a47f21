"""Where a local run's time goes: imports, each component, and what runs around them.

    python -m bench.profile_run [--config FILE] [--set section.key=value ...] [--cprofile DIR] [--top N]

Runs `python -m pipeline run` in this process and prints, per phase, the
process's CPU seconds (user + system, all threads) next to the wall seconds.
CPU time is the figure to compare on a machine shared with other work: wall
time there includes waiting for a core. With --cprofile, each phase is also
profiled on its own (cProfile with a CPU-time clock) into DIR/<phase>.prof and
its top functions by cumulative CPU time are printed.

Phases are found by wrapping a few entry points for the length of the run
(TFX's Launcher.launch for each component; our create_pipeline, summarize and
write_report); the pipeline itself runs unchanged. docs/performance.md shows
what the figures said and the commands behind them.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import os
import pstats
import sys
import time

_CPU_AT_START = time.process_time()  # before the heavy imports below (interpreter start-up is not in it)
_WALL_AT_START = time.perf_counter()

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")


@dataclasses.dataclass
class Phase:
    name: str
    wall: float = 0.0
    cpu: float = 0.0
    calls: int = 0


def _cpu() -> float:
    return time.process_time()


class Recorder:
    def __init__(self, cprofile_dir: str | None):
        self.phases: dict[str, Phase] = {}
        self.cprofile_dir = cprofile_dir
        self._profiles: dict[str, cProfile.Profile] = {}
        self._active: list[str] = []

    @contextlib.contextmanager
    def phase(self, name: str):
        # Nested phases (a component inside the runner) are charged to the innermost only.
        outer = self._active[-1] if self._active else None
        if outer and outer in self._profiles:
            self._profiles[outer].disable()
        profile = None
        if self.cprofile_dir:
            profile = self._profiles.setdefault(name, cProfile.Profile(time.process_time))
            profile.enable()
        self._active.append(name)
        wall0, cpu0 = time.perf_counter(), _cpu()
        try:
            yield
        finally:
            wall, cpu = time.perf_counter() - wall0, _cpu() - cpu0
            if profile:
                profile.disable()
            self._active.pop()
            p = self.phases.setdefault(name, Phase(name))
            p.wall, p.cpu, p.calls = p.wall + wall, p.cpu + cpu, p.calls + 1
            if outer:  # the outer phase keeps only its own time
                o = self.phases.setdefault(outer, Phase(outer))
                o.wall, o.cpu = o.wall - wall, o.cpu - cpu
                if outer in self._profiles:
                    self._profiles[outer].enable()

    def wrap(self, owner, attr: str, name_of) -> None:
        original = getattr(owner, attr)

        def wrapped(*args, **kwargs):
            with self.phase(name_of(*args)):
                return original(*args, **kwargs)

        setattr(owner, attr, wrapped)

    def dump(self, top: int) -> None:
        os.makedirs(self.cprofile_dir, exist_ok=True)
        for name, profile in self._profiles.items():
            path = os.path.join(self.cprofile_dir, f"{name}.prof")
            profile.dump_stats(path)
            print(f"\n== {name}: top {top} by cumulative CPU ({path})")
            pstats.Stats(profile, stream=sys.stdout).sort_stats("cumulative").print_stats(top)


def instrument(recorder: Recorder) -> None:
    """Wrap the entry points that mark the phases of a run."""
    from tfx.orchestration.portable import launcher

    import pipeline.local.runner as local_runner

    if not hasattr(launcher.Launcher, "launch"):
        raise SystemExit("bench.profile_run: tfx's Launcher.launch is gone; update instrument() for this TFX")
    recorder.wrap(launcher.Launcher, "launch", lambda self: self._pipeline_node.node_info.id)
    recorder.wrap(local_runner, "create_pipeline", lambda *a: "(create_pipeline)")
    recorder.wrap(local_runner, "summarize", lambda *a: "(summary)")
    recorder.wrap(local_runner, "write_report", lambda *a: "(report)")


def table(recorder: Recorder, import_wall: float, import_cpu: float, total_wall: float, total_cpu: float) -> str:
    rows = [("(imports)", import_wall, import_cpu, 1)]
    rows += [(p.name, p.wall, p.cpu, p.calls) for p in recorder.phases.values() if p.name != "(run)"]
    run = recorder.phases.get("(run)")
    if run:  # the runner's own work: compiling the IR, MLMD set-up, anything between components
        rows.append(("(runner, outside components)", run.wall, run.cpu, 1))
    named_wall, named_cpu = sum(r[1] for r in rows), sum(r[2] for r in rows)
    rows.append(("(rest: config, logging, exit)", total_wall - named_wall, total_cpu - named_cpu, 1))
    lines = [f"{'phase':32} {'wall s':>8} {'cpu s':>8}", "-" * 50]
    lines += [f"{n:32} {w:8.2f} {c:8.2f}" + (f"  ({k} calls)" if k > 1 else "") for n, w, c, k in rows]
    lines += ["-" * 50, f"{'total (process)':32} {total_wall:8.2f} {total_cpu:8.2f}",
              f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/local.yaml")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("--cprofile", metavar="DIR", help="profile each phase into DIR/<phase>.prof")
    parser.add_argument("--top", type=int, default=25, help="functions listed per phase with --cprofile")
    args = parser.parse_args(argv)

    recorder = Recorder(args.cprofile)
    with recorder.phase("(imports)") if args.cprofile else contextlib.nullcontext():
        import pipeline.local.runner as local_runner
        from pipeline.config import load_config
    import_wall, import_cpu = time.perf_counter() - _WALL_AT_START, time.process_time() - _CPU_AT_START
    recorder.phases.pop("(imports)", None)

    config = load_config(args.config, args.set)
    instrument(recorder)
    from tfx.orchestration.local import local_dag_runner

    recorder.wrap(local_dag_runner.LocalDagRunner, "run", lambda *a: "(run)")
    local_runner.run_local(config)
    total_wall, total_cpu = time.perf_counter() - _WALL_AT_START, time.process_time() - _CPU_AT_START
    if args.cprofile:
        recorder.dump(args.top)
    print(table(recorder, import_wall, import_cpu, total_wall, total_cpu))
    return 0


if __name__ == "__main__":
    sys.exit(main())
