"""What a run is asked to do: :class:`RunOptions`, the splits, the executors and the options only
some experiments take. The lowest module of the experiments wing: every other one may import it,
and it imports none of them (the executors' names live here, the executors in ``executors``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from taskextrap.errors import TaskextrapError
from taskextrap.seeding import FRESH_TEST_SEED
from taskextrap.sharding import Shard

EXECUTORS = ("serial", "ray")  # where the units run (experiments.executors)
SPLITS = ("test", "dev")


# The options only some experiments take, with the command-line flags that set them. Every
# experiment takes the others (profile, seeds, out, split, plots, progress).
OPTION_FLAGS = {
    "protocol": "--protocol",
    "family": "--family",
    "embedding": "--embedding",
    "anchors": "--anchors",
    "device": "--device",
    "extra": "--model/--dtype/--load-in-4bit",
    "shard": "--shard",
    "test_seed": "--test-seed",
    "split_seed": "--split-seed",
}


@dataclass
class RunOptions:
    """Everything a run needs; the CLI and the Python API both build one."""

    profile: str = "quick"
    protocol: str = "paper"
    family: str | None = None
    seeds: int | None = None
    out: Path = Path("runs")
    device: str = "cpu"
    embedding: str | None = None  # None: the regime's default (see each experiment)
    anchors: int = 2
    plots: bool = True
    progress: bool = True
    extra: dict = field(default_factory=dict)
    shard: Shard = field(default_factory=Shard)  # this process's part of a run split over several
    split: str = "test"  # "test": the real held-out tasks; "dev": a pseudo-extrapolation inside training
    test_seed: int | None = None  # None: FRESH_TEST_SEED; 10_000 is the seed of the runs before it
    split_seed: int | None = None  # codeio: the seed of the pair split (None: the experiment's default)
    run_dir: Path | None = None  # set by the runner: where results.json and run files (prompts.jsonl) go
    seed: int | None = None  # one training seed (a Slurm array task's), instead of the first ``seeds``
    executor: str = "serial"  # where the units run: "serial" (this process) or "ray" (experiments.executors)
    unit_cpus: int = 1  # torch threads of each unit (under Ray also the CPUs its task declares); in its key
    units_per_gpu: int = 1  # Ray tasks sharing one GPU at once (each declares 1/N of a GPU); not in a key
    # {method: scale} chosen on this family's own dev split (reproduce --calibrate): the intervals'
    # coverage rows are read from the raw curve at that scale (search.calibration.recalibrated)
    interval_scales: dict | None = None

    def __post_init__(self):
        if self.split not in SPLITS:
            raise TaskextrapError(f"unknown split {self.split!r}; choose from {', '.join(SPLITS)}")
        if self.executor not in EXECUTORS:
            raise TaskextrapError(f"unknown executor {self.executor!r}; choose from {', '.join(EXECUTORS)}")
        if isinstance(self.unit_cpus, bool) or not isinstance(self.unit_cpus, int) or self.unit_cpus < 1:
            raise TaskextrapError(f"unit_cpus must be a whole number >= 1, got {self.unit_cpus!r}")
        if isinstance(self.units_per_gpu, bool) or not isinstance(self.units_per_gpu, int) or self.units_per_gpu < 1:
            raise TaskextrapError(f"units_per_gpu must be a whole number >= 1, got {self.units_per_gpu!r}")
        if self.units_per_gpu > 1 and (self.executor != "ray" or not self.device.startswith("cuda")):
            raise TaskextrapError(
                "--units-per-gpu shares a GPU between units run as Ray tasks: "
                "give it with --executor ray and --device cuda"
            )
        if self.seed is not None and self.seeds is not None:
            raise TaskextrapError("give --seeds N (seeds 0..N-1) or --seed S (that one seed), not both")
        if self.executor == "ray" and self.shard.count > 1:
            raise TaskextrapError(
                "--executor ray does not combine with --shard (or torchrun/Slurm ranks): Ray spreads the units itself"
            )

    def given(self) -> set[str]:
        """The experiment-specific options set to something other than their defaults (see
        :data:`OPTION_FLAGS`): what an experiment that does not take them must refuse."""
        defaults = RunOptions()
        return {name for name in OPTION_FLAGS if getattr(self, name) != getattr(defaults, name)}

    @property
    def seed_of_tests(self) -> int:
        """The seed of the test (or dev) draws: ``test_seed``, else :data:`FRESH_TEST_SEED`."""
        return FRESH_TEST_SEED if self.test_seed is None else int(self.test_seed)
