"""python -m ngraph.launch: run a data-parallel job under mpirun and keep it going.

    python -m ngraph.launch -np 4 --hosts node1:2,node2:2 --min-np 2 \\
        --checkpoint-dir /shared/ck python examples/train_mnist.py

The launcher runs ``mpirun`` for the command and watches it. Debian's Open MPI 4.1 has no
ULFM, so a job that loses a rank cannot go on in place: when the job ends because a rank or
a host was lost, the launcher relaunches it on the hosts that are left (down to --min-np) and
the script continues from the last complete checkpoint in --checkpoint-dir (``ng.elastic``).
When hosts come back (--host-discovery-script lists them again), it asks the job to write a
checkpoint and stop (SIGUSR2), and relaunches it on more ranks (up to --max-np). SIGTERM or
SIGINT to the launcher makes the job finish its step, write a checkpoint and stop (SIGUSR1 to
mpirun, which forwards it to every rank); the launcher then exits with status 75: run the
same command to continue. Every launch is logged on stderr and in
<checkpoint-dir>/launch.log, with its reason, world size, hosts and the checkpoint it resumes
from. docs/distributed.md ("Elastic training") describes it all.

Exit status: 0 the job finished; 75 stopped on SIGTERM/SIGINT (resume later); 2 a bad
option, or the job's own status 2 (usage error) or 3 (training diverged), which are not
retried; 1 the launcher gave up (more failures than --max-restarts, too few hosts for
--min-np after --wait-timeout, or no host discovery).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from ngraph import elastic

PREEMPTED = elastic.PREEMPTED
RESIZE = elastic.RESIZE
GAVE_UP = 1
USAGE = 2
#: The job's statuses that a relaunch would not cure: a usage error (argparse's status,
#: and the examples' for bad options, data or checkpoints) and a diverged loss (the
#: examples' status 3).
NOT_RETRIED = (2, 3)

USAGE_TEXT = """\
usage: python -m ngraph.launch [-np N] [--hosts H:S,... | --hostfile FILE |
                               --host-discovery-script SCRIPT] [--min-np N] [--max-np N]
                               [--max-restarts N] --checkpoint-dir DIR [--mpi-args ARGS]
                               [mpirun options] [--] COMMAND [ARGS...]"""

HELP_TEXT = USAGE_TEXT + """

Runs COMMAND under mpirun, relaunching it from its last checkpoint when a rank or host is
lost, growing it when hosts return, and stopping it cleanly on SIGTERM/SIGINT.

options:
  -np N, -n N, --np N   ranks of the first launch (default: every slot of --hosts or
                        --hostfile, or of the first discovery; required without hosts)
  --hosts H:S,...       hosts and their slots (ranks), e.g. node1:2,node2:2 (also -H,
                        --host); a host without :S has 1 slot
  --hostfile FILE       hosts, one a line: 'node1 slots=2' (Open MPI) or 'node1:2'
  --host-discovery-script SCRIPT
                        an executable that prints the hosts available now, one 'host:slots'
                        a line (as Horovod's); run before every launch and every
                        --discovery-interval seconds while the job runs
  --min-np N            fewest ranks to run on (default: -np; 1 with discovery and no
                        -np); with fewer slots the launcher waits for discovery up to
                        --wait-timeout, else gives up
  --max-np N            most ranks to grow to (default: -np; with discovery and no -np:
                        no limit)
  --max-restarts N      relaunches after failures before giving up (default 3); stops to
                        resize or after preemption are not counted
  --checkpoint-dir DIR  where the job checkpoints (NGRAPH_ELASTIC_CHECKPOINT_DIR) and the
                        launcher logs (launch.log); on a file system every host sees
  --mpi-args ARGS       more mpirun options, one shell-quoted string (any option)
  --discovery-interval S
                        seconds between discoveries (default 5)
  --wait-timeout S      seconds to wait for enough hosts for --min-np (default 600)
  --host-cooldown S     seconds before a host lost by the job is used again (default: not
                        until the discovery script stops listing it and lists it again)
  --stop-timeout S      seconds the job has to write its checkpoint after SIGTERM before
                        it is killed (default 120)
  --mpirun PATH         the mpirun to run (default: mpirun)
  -h, --help            this help

mpirun options before COMMAND are passed through when they are known: flags such as
--oversubscribe, --allow-run-as-root, --tag-output, and -x NAME[=VALUE], --map-by X,
--bind-to X, --rank-by X, --mca NAME VALUE (the full list: ngraph.launch.MPIRUN_OPTIONS);
give any other with --mpi-args. The job gets NGRAPH_ELASTIC_CHECKPOINT_DIR and
NGRAPH_ELASTIC_RESTART (-x, on every host).

exit status: 0 done; 75 stopped on SIGTERM/SIGINT after the job's checkpoint (run the same
command to continue); 2 a bad option, or the job exited 2 or 3 (not retried); 1 gave up.
"""

#: mpirun (Open MPI 4.1) options passed through, by how many values follow them.
MPIRUN_OPTIONS: dict[str, int] = {
    **dict.fromkeys([
        "--oversubscribe", "-oversubscribe", "--nooversubscribe", "--allow-run-as-root",
        "--tag-output", "-tag-output", "--timestamp-output", "-timestamp-output",
        "--merge-stderr-to-stdout", "--report-bindings", "-report-bindings", "--display-map",
        "-display-map", "--display-allocation", "--use-hwthread-cpus", "--noprefix", "-v",
        "--verbose", "-q", "--quiet", "--report-child-jobs-separately", "--xml",
        "--enable-recovery", "--disable-recovery", "--continuous",
    ], 0),
    **dict.fromkeys([
        "-x", "--map-by", "-map-by", "--bind-to", "-bind-to", "--rank-by", "-rank-by",
        "--npernode", "-npernode", "-N", "--npersocket", "-npersocket", "--cpus-per-proc",
        "-cpus-per-proc", "--cpus-per-rank", "-cpus-per-rank", "--prefix", "-prefix",
        "--wdir", "-wdir", "--wd", "-wd", "--path", "-path", "--output-filename",
        "-output-filename", "--stdin", "-stdin", "--timeout", "-timeout", "--tune", "-tune",
        "--am", "-am", "--preload-files", "-preload-files", "--report-uri", "-report-uri",
    ], 1),
    **dict.fromkeys(["--mca", "-mca", "--gmca", "-gmca"], 2),
}


SIGKILL_TIMEOUT = "odls_base_sigkill_timeout"


class UsageError(Exception):
    """A bad option: printed on one line, exit status 2."""


class _Help(Exception):
    """-h or --help: the help is printed, exit status 0."""


class _Stopped(Exception):
    """SIGTERM or SIGINT came while the launcher waited for hosts."""


class _GiveUp(Exception):
    """The launcher cannot go on (logged, exit status 1)."""


# ------------------------------------------------------------------------------ options


@dataclass
class Options:
    command: list[str]
    checkpoint_dir: str
    np: int | None = None
    hosts: list[tuple[str, int]] | None = None
    hostfile: str | None = None
    discovery: str | None = None
    min_np: int | None = None
    max_np: int | None = None
    max_restarts: int = 3
    mpi_args: list[str] = field(default_factory=list)
    discovery_interval: float = 5.0
    wait_timeout: float = 600.0
    host_cooldown: float | None = None
    stop_timeout: float = 120.0
    mpirun: str = "mpirun"


_OURS = {
    "-np": "np", "-n": "np", "--np": "np",
    "--hosts": "hosts", "-H": "hosts", "--host": "hosts", "-host": "hosts",
    "--hostfile": "hostfile", "-hostfile": "hostfile", "--machinefile": "hostfile",
    "-machinefile": "hostfile",
    "--host-discovery-script": "discovery", "--min-np": "min_np", "--max-np": "max_np",
    "--max-restarts": "max_restarts", "--checkpoint-dir": "checkpoint_dir",
    "--mpi-args": "mpi_args", "--discovery-interval": "discovery_interval",
    "--wait-timeout": "wait_timeout", "--host-cooldown": "host_cooldown",
    "--stop-timeout": "stop_timeout", "--mpirun": "mpirun",
}


def _count(value: str, option: str, least: int) -> int:
    try:
        n = int(value)
    except ValueError:
        raise UsageError(f"{option} must be an integer, got {value!r}") from None
    if n < least:
        raise UsageError(f"{option} must be >= {least}, got {n}")
    return n


def _seconds(value: str, option: str) -> float:
    try:
        s = float(value)
    except ValueError:
        raise UsageError(f"{option} must be a number of seconds, got {value!r}") from None
    if not s > 0 or s != s or s == float("inf"):
        raise UsageError(f"{option} must be a positive number of seconds, got {value!r}")
    return s


def parse_hosts(text: str, what: str) -> list[tuple[str, int]]:
    """[(host, slots)] of 'h1:2,h2' (what: the option or file, for errors)."""
    hosts = []
    for item in text.replace(",", " ").split():
        hosts.append(_host(item, what))
    return _unique(hosts, what)


def _host(item: str, what: str) -> tuple[str, int]:
    name, colon, slots = item.partition(":")
    if not name or not re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+", name):
        raise UsageError(f"{what}: {item!r} is not a host name (host or host:slots)")
    return name, (_count(slots, f"{what}: the slots of {name}", 1) if colon else 1)


def _unique(hosts: list[tuple[str, int]], what: str) -> list[tuple[str, int]]:
    seen = set()
    for name, _ in hosts:
        if name in seen:
            raise UsageError(f"{what}: host {name} is listed twice")
        seen.add(name)
    return hosts


def parse_host_lines(text: str, what: str) -> list[tuple[str, int]]:
    """[(host, slots)] of a hostfile's or a discovery script's lines: 'host slots=N',
    'host:N' or 'host'; '#' starts a comment."""
    hosts = []
    for lineno, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        where = f"{what} line {lineno}"
        if ":" in words[0]:
            if len(words) > 1:
                raise UsageError(f"{where}: {line.strip()!r}: expected 'host:slots'")
            hosts.append(_host(words[0], where))
            continue
        slots = 1
        for word in words[1:]:
            key, eq, value = word.partition("=")
            if key == "slots" and eq:
                slots = _count(value, f"{where}: slots", 1)
            elif not eq:
                raise UsageError(f"{where}: {line.strip()!r}: expected 'host slots=N'")
        hosts.append(_host(words[0], where)[:1] + (slots,))
    return _unique(hosts, what)


def parse_args(argv: list[str]) -> Options:
    """The launcher's options; raises UsageError naming the option at fault."""
    values: dict[str, str] = {}
    mpi: list[str] = []
    command: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            command = argv[i + 1:]
            break
        if not a.startswith("-") or a == "-":
            command = argv[i:]
            break
        if a in ("-h", "--help"):
            raise _Help
        name, eq, inline = a.partition("=") if a.startswith("--") else (a, "", "")
        if name in _OURS:
            if eq:
                value = inline
            elif i + 1 < len(argv):
                i += 1
                value = argv[i]
            else:
                raise UsageError(f"{name} needs a value")
            key = _OURS[name]
            if key in values and key != "mpi_args":
                raise UsageError(f"{name}: given twice (or with another spelling)")
            values[key] = values.get(key, "") + " " + value if key == "mpi_args" else value
        elif a in MPIRUN_OPTIONS:
            k = MPIRUN_OPTIONS[a]
            if i + k >= len(argv):
                raise UsageError(f"mpirun option {a} needs {k} value(s)")
            mpi += argv[i:i + 1 + k]
            i += k
        elif a in ("--app", "-app", "--output-proctable", "-np-per-node"):
            raise UsageError(f"mpirun option {a} is not supported by ngraph.launch")
        else:
            raise UsageError(
                f"unknown option {a}: ngraph.launch passes only known mpirun options through "
                f"(ngraph.launch.MPIRUN_OPTIONS); give others with --mpi-args '{a} ...', and "
                "put the command's own options after the command")
        i += 1
    if not command:
        raise UsageError("no command to run: give it after the options, e.g. "
                         "python -m ngraph.launch -np 2 --checkpoint-dir ck python train.py")
    if "checkpoint_dir" not in values:
        raise UsageError("--checkpoint-dir is required: the directory where the job "
                         "checkpoints and resumes from, on a file system every host sees")
    o = Options(command=command, checkpoint_dir=os.path.abspath(values["checkpoint_dir"]))
    try:
        o.mpi_args = shlex.split(values.get("mpi_args", "")) + mpi
    except ValueError as e:
        raise UsageError(f"--mpi-args: {e}") from None
    for key, option in (("np", "-np"), ("min_np", "--min-np"), ("max_np", "--max-np")):
        if key in values:
            setattr(o, key, _count(values[key], option, 1))
    if "max_restarts" in values:
        o.max_restarts = _count(values["max_restarts"], "--max-restarts", 0)
    for key, option in (("discovery_interval", "--discovery-interval"),
                        ("wait_timeout", "--wait-timeout"), ("host_cooldown", "--host-cooldown"),
                        ("stop_timeout", "--stop-timeout")):
        if key in values:
            setattr(o, key, _seconds(values[key], option))
    o.mpirun = values.get("mpirun", "mpirun")
    if shutil.which(o.mpirun) is None:
        raise UsageError(f"--mpirun {o.mpirun}: not found or not executable"
                         + (" (install Open MPI: apt-get install openmpi-bin)"
                            if "mpirun" not in values else ""))
    given = [opt for key, opt in (("hosts", "--hosts"), ("hostfile", "--hostfile"),
                                  ("discovery", "--host-discovery-script")) if key in values]
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)}: give one way to name the hosts")
    if "hosts" in values:
        o.hosts = parse_hosts(values["hosts"], "--hosts")
        if not o.hosts:
            raise UsageError("--hosts: no host given")
    if "hostfile" in values:
        o.hostfile = values["hostfile"]
        try:
            with open(o.hostfile) as f:
                o.hosts = parse_host_lines(f.read(), f"--hostfile {o.hostfile}")
        except OSError as e:
            raise UsageError(f"--hostfile {o.hostfile}: cannot read it ({e.strerror})") from None
        if not o.hosts:
            raise UsageError(f"--hostfile {o.hostfile}: lists no host")
    if "discovery" in values:
        o.discovery = values["discovery"]
        if not (os.path.isfile(o.discovery) and os.access(o.discovery, os.X_OK)):
            raise UsageError(f"--host-discovery-script {o.discovery}: not an executable file")
    if o.np is None and o.hosts is None and o.discovery is None:
        raise UsageError("-np is required without --hosts, --hostfile or "
                         "--host-discovery-script (the ranks then run on this machine)")
    if o.hosts is not None:
        slots = sum(s for _, s in o.hosts)
        if o.np is None:
            o.np = slots
        elif o.np > slots:
            raise UsageError(f"-np {o.np} is more than the {slots} slots of the hosts")
    if o.min_np is None:
        o.min_np = o.np if o.np is not None else 1
    if o.max_np is None and o.np is not None:
        o.max_np = max(o.np, o.min_np)
    if o.np is not None and o.min_np > o.np:
        raise UsageError(f"--min-np {o.min_np} is more than -np {o.np}")
    if o.max_np is not None and o.np is not None and o.max_np < o.np:
        raise UsageError(f"--max-np {o.max_np} is less than -np {o.np}")
    if o.max_np is not None and o.max_np < o.min_np:
        raise UsageError(f"--max-np {o.max_np} is less than --min-np {o.min_np}")
    return o


# ---------------------------------------------------------------------- mpirun output

_LOST_PATTERNS = [
    # mpirun noticed that process rank 3 with PID 123 on node h1 exited on signal 9 (Killed).
    re.compile(r"process rank (?P<rank>\d+) with PID \d+ on node (?P<host>\S+?) exited on "
               r"signal (?P<signal>\d+)"),
    # ORTE has lost communication with a remote daemon. ... Remote daemon: [[..],1] on node h1
    re.compile(r"Remote daemon\s*:.*? on node (?P<host>\S+)"),
    # An ORTE daemon has unexpectedly failed after launch ... on node h1 / ssh errors
    re.compile(r"ORTE daemon .*? on node (?P<host>\S+)"),
    re.compile(r"ssh: connect to host (?P<host>\S+) port"),
    re.compile(r"ssh: Could not resolve hostname (?P<host>[^:\s]+)"),
]
# ngraph's own errors name the ranks that did not arrive: "waiting for rank(s) 2, 3 of ...".
_RANKS_PATTERN = re.compile(r"waiting for rank\(s\) (?P<ranks>\d+(?:, \d+)*)")


def lost_hosts(output: str, layout: list[tuple[str, int]] | None = None
               ) -> tuple[list[str], str]:
    """The hosts that mpirun's `output` names as lost (a rank killed by a signal, a daemon
    lost or unreachable; with `layout`, the hosts of ranks ngraph says it waited for), and
    the first line that says so (or "")."""
    hosts: list[str] = []
    reason = ""
    for line in output.splitlines():
        found = []
        for pattern in _LOST_PATTERNS:
            found += [m.group("host").rstrip(".,") for m in pattern.finditer(line)]
        if layout:
            for m in _RANKS_PATTERN.finditer(line):
                found += [h for r in m.group("ranks").split(", ")
                          if (h := host_of_rank(int(r), layout))]
        for h in found:
            if h not in hosts:
                hosts.append(h)
        if found and not reason:
            reason = line.strip()
    return hosts, reason


def host_of_rank(rank: int, layout: list[tuple[str, int]]) -> str | None:
    """The host of `rank` when ranks fill the hosts' slots in order (mpirun's default)."""
    for host, slots in layout:
        if rank < slots:
            return host
        rank -= slots
    return None


def exit_reason(status: int, output: str) -> str:
    """A line on why mpirun ended: the first ngraph or mpirun line that says, and the
    status."""
    for pattern in (r"^.*DistributedError: .*$", r"^.*exited on signal.*$",
                    r"^.*lost communication.*$", r"^.*Error: .*$", r"^.*error: .*$"):
        m = re.search(pattern, output, re.M)
        if m:
            return f"{m.group(0).strip()[:300]} (mpirun exit {status})"
    m = re.search(r"Process name: \[\[\d+,\d+\],(\d+)\]\s*\n\s*Exit code:\s*(\d+)", output)
    if m:
        return f"rank {m.group(1)} exited with status {m.group(2)} (mpirun exit {status})"
    if status < 0:
        return f"mpirun ended by signal {-status}"
    return f"mpirun exit {status}"


# ------------------------------------------------------------------------------ logging


class Log:
    """Lines on stderr ([ngraph.launch] ...) and, timestamped, in <checkpoint-dir>/launch.log."""

    def __init__(self, directory: str):
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, "launch.log")

    def __call__(self, line: str) -> None:
        now = time.time()
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
        stamp += f".{int(now * 1000) % 1000:03d}"
        sys.stderr.write(f"[ngraph.launch {stamp[11:]}] {line}\n")
        sys.stderr.flush()
        try:
            with open(self.path, "a") as f:
                f.write(f"{stamp} {line}\n")
        except OSError:
            pass


def checkpoint_text(directory: str) -> str:
    """Where the job will resume: the checkpoint's epoch, position and update count."""
    path = elastic.checkpoint_path(directory)
    if not os.path.exists(path):
        return "from the start (no checkpoint yet)"
    try:
        from ngraph.checkpoint import read_metadata  # noqa: PLC0415

        r = read_metadata(path)["elastic"]
        where = (f"after epoch {r['epoch']}" if not r["position"] else
                 f"in epoch {r['epoch'] + 1} at example {r['position']}")
        return (f"from {path}: {where}, step {r['updates']} (written by {r['world_size']} "
                "rank(s))")
    except Exception as e:  # the job itself reports a bad checkpoint, with its status
        return f"from {path} (unreadable here: {e})"


# ----------------------------------------------------------------------------- the job


@dataclass
class Launch:
    number: int
    world: int
    layout: list[tuple[str, int]] | None  # None: this machine, no hostfile
    reason: str


class Job:
    """One mpirun: its process, its output (echoed, and the last part kept), its readiness."""

    def __init__(self, options: Options, launch: Launch):
        self.options, self.launch = options, launch
        d = options.checkpoint_dir
        self.ready_path = os.path.join(d, elastic.READY_NAME)
        if os.path.exists(self.ready_path):
            os.unlink(self.ready_path)
        cmd = [options.mpirun]
        if launch.layout is not None:
            hostfile = os.path.join(d, "hostfile")
            with open(hostfile, "w") as f:
                f.writelines(f"{h} slots={s}\n" for h, s in launch.layout)
            cmd += ["--hostfile", hostfile]
        cmd += ["-np", str(launch.world), "-x", elastic.CHECKPOINT_DIR_ENV, "-x",
                elastic.RESTART_ENV]
        if SIGKILL_TIMEOUT not in options.mpi_args:
            # When a rank ends (a failure, or every rank stopping with 75 or 76), mpirun
            # aborts the job: SIGTERM to every rank, SIGKILL after this many seconds (default
            # 1). Under the launcher the ranks turn SIGTERM into a stop request, and the
            # grace only delayed the relaunch (measured: 1 s on one host, 2-4 s across
            # hosts): 0 ends them at once. The ranks that stop write their checkpoint before
            # any of them exits (MPI_Finalize waits for every rank).
            cmd += ["--mca", SIGKILL_TIMEOUT, "0"]
        cmd += [*options.mpi_args, *options.command]
        env = dict(os.environ)
        env[elastic.CHECKPOINT_DIR_ENV] = d
        env[elastic.RESTART_ENV] = str(launch.number)
        self.started = time.time()
        try:
            self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True,
                                         preexec_fn=_die_with_parent)
        except OSError as e:
            raise UsageError(f"--mpirun {options.mpirun}: cannot run it ({e.strerror})") from None
        self.tail: deque[str] = deque(maxlen=400)
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._pump, args=(stream, out), daemon=True)
                         for stream, out in ((self.proc.stdout, sys.stdout),
                                             (self.proc.stderr, sys.stderr))]
        for t in self._threads:
            t.start()

    def _pump(self, stream, out) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace")
            out.write(line)
            out.flush()
            with self._lock:
                self.tail.append(line)

    def output(self) -> str:
        for t in self._threads:
            t.join(timeout=5)
        with self._lock:
            return "".join(self.tail)

    def ready(self) -> dict | None:
        """The job's ready record once it trains (rank 0 wrote it after its first step)."""
        try:
            with open(self.ready_path) as f:
                record = json.load(f)
        except (OSError, ValueError):
            return None
        return record if record.get("restart") == self.launch.number else None

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        """SIGKILL to mpirun's process group (mpirun and the ranks it started here; the
        other hosts' daemons end theirs when they lose mpirun)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _load_prctl():
    """libc's prctl, loaded here in the parent: the child only calls it (no dlopen after
    fork in a process with threads)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None


_PRCTL = _load_prctl()


def _die_with_parent() -> None:
    """mpirun gets SIGTERM if the launcher dies (Linux), so no job outlives it."""
    if _PRCTL is not None:
        _PRCTL(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG


# -------------------------------------------------------------------------- launcher


class Launcher:
    def __init__(self, options: Options):
        self.o = options
        self.log = Log(options.checkpoint_dir)
        self.excluded: dict[str, float] = {}  # host -> when it was lost
        self.gone_since_lost: set[str] = set()  # lost hosts discovery stopped listing
        self.stop_signal: int | None = None
        self.stop_count = 0
        self._wake = threading.Event()  # set by the signal handler: the loops react at once
        self.discovered: list[tuple[str, int]] | None = None

    # --------------------------------------------------------------- hosts

    def discover(self) -> list[tuple[str, int]]:
        """The discovery script's hosts now (the last good list when it fails)."""
        o = self.o
        try:
            r = subprocess.run([o.discovery], capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                raise RuntimeError(f"exit status {r.returncode}: {r.stderr.strip()[:200]}")
            hosts = parse_host_lines(r.stdout, f"--host-discovery-script {o.discovery} output")
        except (OSError, subprocess.TimeoutExpired, RuntimeError, UsageError) as e:
            if self.discovered is None:
                raise _GiveUp(f"--host-discovery-script {o.discovery} failed: {e}") from None
            self.log(f"host discovery failed ({e}); keeping the last list")
            return self.discovered
        names = {h for h, _ in hosts}
        for h in list(self.excluded):
            if h not in names:
                if h not in self.gone_since_lost:
                    self.log(f"host {h} (lost) is no longer listed by the discovery script")
                self.gone_since_lost.add(h)
            elif h in self.gone_since_lost:  # listed again after it was gone: a new host
                del self.excluded[h]
                self.gone_since_lost.discard(h)
                self.log(f"host {h} is listed again by the discovery script: using it again")
        self.discovered = hosts
        return hosts

    def hosts(self) -> list[tuple[str, int]] | None:
        """The usable hosts now, in order (None: this machine, no hosts named); runs the
        discovery script when there is one."""
        o = self.o
        if o.discovery is not None:
            hosts = self.discover()
        elif o.hosts is not None:
            hosts = o.hosts
        else:
            return None
        now = time.monotonic()
        if o.host_cooldown is not None:
            for h, when in list(self.excluded.items()):
                if now - when >= o.host_cooldown:
                    del self.excluded[h]
                    self.log(f"host {h}: its --host-cooldown of {o.host_cooldown:g} s is over: "
                             "using it again")
        return [(h, s) for h, s in hosts if h not in self.excluded]

    def wanted(self, hosts, first: bool) -> int:
        """The world size for these hosts."""
        o = self.o
        if hosts is None:
            return o.np
        slots = sum(s for _, s in hosts)
        want = min(slots, o.max_np) if o.max_np is not None else slots
        if first and o.np is not None:
            want = min(want, o.np)
        return want

    @staticmethod
    def layout(hosts, world: int) -> list[tuple[str, int]]:
        out, left = [], world
        for h, s in hosts:
            if left <= 0:
                break
            out.append((h, min(s, left)))
            left -= min(s, left)
        return out

    def wait_for_hosts(self, first: bool):
        """(hosts, world) with world >= --min-np, waiting for discovery (or a cooldown) up to
        --wait-timeout; None when there are not enough (logged)."""
        o = self.o
        deadline = time.monotonic() + o.wait_timeout
        said = False
        while True:
            hosts = self.hosts()
            world = self.wanted(hosts, first)
            if world >= o.min_np:
                return hosts, world
            can_wait = o.discovery is not None or (o.host_cooldown is not None and self.excluded)
            lost = f"; lost: {', '.join(self.excluded)}" if self.excluded else ""
            have = ", ".join(f"{h}:{s}" for h, s in hosts or []) or "none"
            if not can_wait:
                self.log(f"giving up: {world} slot(s) (hosts {have}{lost}) for --min-np "
                         f"{o.min_np}, and no --host-discovery-script or --host-cooldown to "
                         "wait for more")
                return None
            if time.monotonic() >= deadline:
                self.log(f"giving up: still {world} slot(s) (hosts {have}{lost}) for --min-np "
                         f"{o.min_np} after --wait-timeout {o.wait_timeout:g} s")
                return None
            if not said:
                self.log(f"waiting for hosts: {world} slot(s) (hosts {have}{lost}) for "
                         f"--min-np {o.min_np}; up to {o.wait_timeout:g} s")
                said = True
            if self._sleep(o.discovery_interval if o.discovery else 1.0, deadline):
                raise _Stopped

    def _sleep(self, seconds: float, deadline: float) -> bool:
        """Sleeps, waking for a stop signal; True when one came."""
        end = min(time.monotonic() + seconds, deadline)
        while time.monotonic() < end and self.stop_signal is None:
            self._wake.wait(min(0.5, max(0.0, end - time.monotonic())))
        return self.stop_signal is not None

    # --------------------------------------------------------------- signals

    def _on_signal(self, signum, frame) -> None:
        self.stop_signal = signum
        self.stop_count += 1
        self._wake.set()

    # --------------------------------------------------------------- the loop

    def run(self) -> int:
        o = self.o
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        self.log(f"command: {shlex.join(o.command)}; checkpoint directory {o.checkpoint_dir}; "
                 f"-np {o.np or 'from discovery'}, --min-np {o.min_np}, --max-np "
                 f"{o.max_np or 'no limit'}, --max-restarts {o.max_restarts}")
        failures, number, reason = 0, 0, "first launch"
        ended: tuple[float, str] | None = None
        while True:
            try:
                got = self.wait_for_hosts(first=number == 0)
            except _Stopped:
                self.log(f"stopped by {signal.Signals(self.stop_signal).name} while waiting "
                         f"for hosts: exit {PREEMPTED} (run the same command to continue)")
                return PREEMPTED
            except _GiveUp as e:
                self.log(f"giving up: {e}")
                return GAVE_UP
            if got is None:
                return GAVE_UP
            hosts, world = got
            layout = None if hosts is None else self.layout(hosts, world)
            launch = Launch(number, world, layout, reason)
            where = "this machine" if layout is None else ", ".join(
                f"{h}:{s}" for h, s in layout)
            self.log(f"launch {number} ({reason}): {world} rank(s) on {where}; resuming "
                     f"{checkpoint_text(o.checkpoint_dir)}")
            status, output, resized = self.watch(Job(o, launch), ended)
            if self.stop_signal is not None:
                name = signal.Signals(self.stop_signal).name
                if status == 0:
                    self.log(f"the job finished (after {name}): exit 0")
                    return 0
                self.log(f"stopped by {name}: the job exited {status}"
                         + (" after writing its checkpoint" if status == PREEMPTED else "")
                         + f"; exit {PREEMPTED} (run the same command to continue)")
                return PREEMPTED
            number += 1
            ended = (time.time(), {RESIZE: "the stop to resize", PREEMPTED: "the preemption"}
                     .get(status, "the failure"))
            if status == 0:
                self.log(f"the job finished: exit 0 ({number} launch(es), {failures} "
                         "restart(s) after failures)")
                return 0
            if status == RESIZE:
                reason = "resize" if resized else "the job asked to be resized"
                continue
            if status == PREEMPTED:
                reason = "the job was preempted (a rank got SIGTERM or SIGUSR1)"
                self.log(f"{reason}: it wrote its checkpoint; relaunching (not counted as a "
                         "failure)")
                continue
            if status in NOT_RETRIED:
                self.log(f"the job exited {status} (a usage error or a diverged run: a "
                         f"relaunch would not help): exit {status}")
                return status
            lost, line = lost_hosts(output, layout)
            used = {h for h, _ in layout or []}
            lost = [h for h in lost if h in used]
            if lost and set(lost) >= used:
                self.log(f"every host of the job is named in its failure ({', '.join(lost)}): "
                         "not excluding any")
                lost = []
            for h in lost:
                self.excluded[h] = time.monotonic()
                self.gone_since_lost.discard(h)
            failures += 1
            why = (f"lost host(s) {', '.join(lost)}: {line} (mpirun exit {status})" if lost
                   else exit_reason(status, output))
            if failures > o.max_restarts:
                self.log(f"giving up: the job failed {failures} time(s), more than "
                         f"--max-restarts {o.max_restarts}; the last failure: {why}")
                return GAVE_UP
            reason = f"restart {failures}/{o.max_restarts} after a failure: {why}"
            self.log(f"the job failed: {why}")

    def watch(self, job: Job, ended: tuple[float, str] | None) -> tuple[int, str, bool]:
        """Waits for the job, forwarding stop signals and asking it to grow when more hosts
        are usable; returns (mpirun's status, its output's tail, whether we asked to resize).
        `ended`: when and why the previous job ended (for the log)."""
        o = self.o
        stop_sent_at: float | None = None
        kill_at: float | None = None
        stop_seen = 0
        resized = False
        ready = False
        next_discovery = time.monotonic()  # the first check as soon as the job trains
        while True:
            running = job.proc.poll() is None
            if running:
                self._wake.wait(0.1)
                self._wake.clear()
            r = None if ready else job.ready()
            if r is not None:
                ready = True
                since = f", {time.time() - ended[0]:.1f} s after {ended[1]}" if ended else ""
                self.log(f"launch {job.launch.number}: training on {r['world_size']} rank(s) "
                         f"from epoch {r['epoch'] + 1}, example {r['position']} "
                         f"({time.time() - job.started:.1f} s after mpirun started{since})")
            if not running:  # (a job that ended at once may have trained: logged above)
                break
            if self.stop_signal is not None and self.stop_count > stop_seen:
                stop_seen = self.stop_count
                name = signal.Signals(self.stop_signal).name
                if stop_sent_at is None and ready:
                    self.log(f"{name}: asking the job to write a checkpoint and stop (SIGUSR1)")
                    job.signal(signal.SIGUSR1)
                    stop_sent_at = time.monotonic()
                    kill_at = stop_sent_at + o.stop_timeout
                else:
                    why = "again" if stop_sent_at is not None else "before the job trains"
                    self.log(f"{name} {why}: ending the job now (SIGTERM to mpirun)")
                    job.signal(signal.SIGTERM)
                    stop_sent_at = stop_sent_at or time.monotonic()
                    kill_at = min(kill_at or float("inf"), time.monotonic() + 10)
            if kill_at is not None and time.monotonic() > kill_at:
                self.log("the job did not stop in time (--stop-timeout "
                         f"{o.stop_timeout:g} s, or 10 s after SIGTERM): killing it")
                job.kill()
                kill_at = float("inf")
            if (ready and not resized and stop_sent_at is None
                    and time.monotonic() >= next_discovery):
                next_discovery = time.monotonic() + o.discovery_interval
                if o.discovery is not None or (o.host_cooldown and self.excluded):
                    hosts = self.hosts()
                    world = self.wanted(hosts, first=False)
                    if world > job.launch.world:
                        have = ", ".join(f"{h}:{s}" for h, s in hosts)
                        self.log(f"{world} slot(s) usable now ({have}), the job runs "
                                 f"{job.launch.world}: asking it to checkpoint and stop to "
                                 "grow (SIGUSR2)")
                        job.signal(signal.SIGUSR2)
                        resized = True
        status = job.proc.wait()
        self.log(f"mpirun exited with status {status} ({time.time() - job.started:.1f} s after "
                 "it started)")
        return status, job.output(), resized


def main(argv: list[str] | None = None) -> int:
    try:
        options = parse_args(sys.argv[1:] if argv is None else list(argv))
        return Launcher(options).run()
    except _Help:
        print(HELP_TEXT)
        return 0
    except UsageError as e:
        print(USAGE_TEXT, file=sys.stderr)
        print(f"ngraph.launch: error: {e}", file=sys.stderr)
        return USAGE


if __name__ == "__main__":
    sys.exit(main())
