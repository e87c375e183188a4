"""A real single-node Slurm cluster on 127.0.0.1 for the tests: its own munged (own key, own
socket), slurmctld and slurmd with 2 CPUs, every file under one temporary directory.

Nothing is faked: where the cluster cannot start (not root, Slurm or munge missing, a daemon that
does not come up), `SlurmCluster.start` raises `ClusterUnavailable` with the reason, and the
tests skip with it.
"""
import ctypes
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import time


class ClusterUnavailable(Exception):
    pass


def _die_with_parent():
    """In the daemon's child before exec: SIGTERM when the test process dies (a ctest timeout
    kills pytest, not the daemons it started; they run in the foreground, so this holds)."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# The node's CPUs and memory as slurmd is told them (CR_CPU: memory is not a consumable, so a
# job's --mem only has to fit RealMemory).
NODE_CPUS = 2
NODE_MEMORY_MB = 2048


class SlurmCluster:
    """Start with `start()`, stop with `stop()` (also on failure: it kills what it started)."""

    def __init__(self, root):
        self.root = pathlib.Path(root)
        self.conf = self.root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": os.fspath(self.conf)}
        self._daemons = []

    # -- commands ---------------------------------------------------------------------------
    def run(self, *argv, check=True, env=None, timeout=60, quiet=False):
        """Runs a Slurm command against this cluster; prints the command and its output (the
        test log shows every sbatch and squeue) unless quiet."""
        argv = [os.fspath(a) for a in argv]
        result = subprocess.run(argv, env={**self.env, **(env or {})}, capture_output=True,
                                text=True, timeout=timeout)
        if not quiet:
            print(f"$ {' '.join(argv)}\n{result.stdout}{result.stderr}", end="", flush=True)
        if check and result.returncode != 0:
            raise RuntimeError(f"{argv[0]} exited {result.returncode}: {result.stderr.strip()}")
        return result

    def sbatch(self, *argv, env=None):
        """Submits and returns the job id (`--parsable`)."""
        return self.run("sbatch", "--parsable", *argv, env=env).stdout.strip().split(";")[0]

    def squeue(self):
        return self.run("squeue", "--all", "-o", "%.14i %.16j %.10T %.8M %R")

    def jobs(self, job):
        """{'ID' or 'ARRAY_TASK': scontrol's fields} for a job or every task of an array
        (finished jobs stay MinJobAge seconds)."""
        out = self.run("scontrol", "-o", "show", "job", job, check=False, quiet=True).stdout
        jobs = {}
        for line in out.splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            if "JobId" not in fields:
                continue
            key = fields["JobId"]
            if fields.get("ArrayTaskId") not in (None, "N/A"):
                key = f"{fields['ArrayJobId']}_{fields['ArrayTaskId']}"
            jobs[key] = fields
        return jobs

    def job_states(self, job):
        return {key: fields["JobState"] for key, fields in self.jobs(job).items()}

    FINISHED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
                "PREEMPTED", "BOOT_FAIL", "DEADLINE")

    def wait(self, job, timeout=300):
        """Waits until every job (or array task) of `job` has finished; returns their states.
        A job left pending on a dependency that can never be met fails at once."""
        deadline = time.monotonic() + timeout
        while True:
            jobs = self.jobs(job)
            if jobs and all(f["JobState"] in self.FINISHED for f in jobs.values()):
                self.squeue()
                return {key: f["JobState"] for key, f in jobs.items()}
            stuck = [k for k, f in jobs.items() if f.get("Reason") == "DependencyNeverSatisfied"]
            if stuck or time.monotonic() > deadline:
                self.squeue()
                raise TimeoutError(f"job {job} will not finish: "
                                   + ", ".join(f"{k} {f['JobState']} ({f.get('Reason')})"
                                               for k, f in jobs.items()))
            time.sleep(0.2)

    # -- life cycle ---------------------------------------------------------------------------
    def start(self):
        missing = [t for t in ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol")
                   if not shutil.which(t) and not os.path.exists(f"/usr/sbin/{t}")]
        if missing:
            raise ClusterUnavailable(f"not installed: {', '.join(missing)} "
                                     "(apt-get install slurm-wlm munge)")
        if os.geteuid() != 0:
            raise ClusterUnavailable("slurmd runs jobs as their submitting user and needs root")
        for sub in ("munge", "state", "spool", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "munge", 0o700)
        try:
            self._start_munge()
            self._write_conf()
            self._spawn("slurmctld", "/usr/sbin/slurmctld", "-D", "-c", "-f", self.conf)
            self._spawn("slurmd", "/usr/sbin/slurmd", "-D", "-N", self.node, "-f", self.conf)
            self._wait_node_idle()
        except Exception:
            self.stop()
            raise
        return self

    def _start_munge(self):
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        self.munge_socket = self.root / "munge" / "munge.sock"
        self._spawn("munged", "/usr/sbin/munged", "-F", "--force", f"--socket={self.munge_socket}",
                    f"--key-file={key}", f"--log-file={self.root / 'log' / 'munged.log'}",
                    f"--pid-file={self.root / 'munge' / 'munged.pid'}",
                    f"--seed-file={self.root / 'munge' / 'munged.seed'}")
        deadline = time.monotonic() + 10
        while not self.munge_socket.exists():
            if self._daemons[-1][1].poll() is not None or time.monotonic() > deadline:
                log = (self.root / "log" / "munged.log")
                raise ClusterUnavailable("munged did not start: "
                                         + (log.read_text()[-500:] if log.exists() else ""))
            time.sleep(0.05)

    def _write_conf(self):
        self.node = "packrec-node"
        host = socket.gethostname().split(".")[0]
        log = self.root / "log"
        self.conf.write_text(f"""\
ClusterName=packrec-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={self.root / 'state'}
SlurmdSpoolDir={self.root / 'spool'}
SlurmctldPidFile={self.root / 'slurmctld.pid'}
SlurmdPidFile={self.root / 'slurmd.pid'}
SlurmctldLogFile={log / 'slurmctld.log'}
SlurmdLogFile={log / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
# Finished jobs stay visible to scontrol for the tests' checks and requeues.
MinJobAge=600
# scancel: SIGTERM, then SIGKILL 2 s later (Slurm's default waits 30 s).
KillWait=2
# The main scheduling loop every second (Slurm's default is 60 s), so a job whose start time
# arrives (a requeued one) does not wait a minute.
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
NodeName={self.node} NodeAddr=127.0.0.1 NodeHostname={host} CPUs={NODE_CPUS} RealMemory={NODE_MEMORY_MB} State=UNKNOWN
PartitionName=test Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
""")

    def _spawn(self, name, *argv):
        log = open(self.root / "log" / f"{name}.stdout", "wb")
        process = subprocess.Popen([os.fspath(a) for a in argv], env=self.env, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True,
                                   preexec_fn=_die_with_parent)
        self._daemons.append((name, process))

    def _wait_node_idle(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, process in self._daemons:
                if process.poll() is not None:
                    raise ClusterUnavailable(f"{name} exited {process.returncode}: "
                                             + self._log_tail(name))
            out = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env,
                                 capture_output=True, text=True).stdout.strip()
            if out == "idle":
                return
            time.sleep(0.2)
        raise ClusterUnavailable("the node did not become idle in 30 s: "
                                 + self._log_tail("slurmctld") + self._log_tail("slurmd"))

    def logs(self, lines=30):
        """The last lines of slurmctld's and slurmd's logs, for a failing test's message."""
        return "\n".join(f"--- {name}\n" + "\n".join(self._log_tail(name, 100000).splitlines()[-lines:])
                         for name in ("slurmctld", "slurmd"))

    def _log_tail(self, name, size=800):
        for path in (self.root / "log" / f"{name}.log", self.root / "log" / f"{name}.stdout"):
            if path.exists() and path.stat().st_size:
                return path.read_text(errors="replace")[-size:]
        return ""

    def stop(self):
        """Cancels every job, then stops the daemons (slurmd, slurmctld, munged: SIGTERM, then
        SIGKILL after 10 s)."""
        if any(name == "slurmctld" and p.poll() is None for name, p in self._daemons):
            subprocess.run(["scancel", "--full", "--user=root"], env=self.env, capture_output=True)
        for name, process in reversed(self._daemons):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        self._daemons.clear()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
