#!/usr/bin/env python3
"""Link and rank faults during distributed training, and what each does.

Trains LeNet on Fashion-MNIST with poseidon_train under mpirun across
emulated hosts (network namespaces, scripts/netns_cluster) and, once
training is under way, injects one fault per run on the last host's link
or rank:

  loss1      1% of packets lost each way, for --fault-seconds
  loss10     10% lost each way, for --fault-seconds
  delay      50 ms delay each way with 10 ms jitter, for --fault-seconds
  flap       the link down for --flap-seconds (3), then up again
  down       the link down for good
  stop_brief one rank stopped (SIGSTOP) for --stop-seconds (5), then SIGCONT
  stop       one rank stopped for good
  kill       one rank killed (SIGKILL)

A fault expected to be survived must leave training going: after the fault
ends, rank 0 must log --progress-lines more display lines, then a SIGINT
to rank 0 stops the job (every rank agrees to stop) and mpirun must exit
with 0. A fault expected to end the job must end it with a non-zero status, an
`Error: rank k of N: ...` line naming a rank of the faulty host (the
stopped rank itself for stop) within --comm_timeout plus --slack seconds of
the fault (the matrix notes when the first line printed names another),
mpirun naming the killed rank for kill, the job over within --slack more,
and no stack trace; a stopped rank's own error must say that it was
stopped. A flap should be survived; when it is not, the job must end with
an error naming another rank within --comm_timeout plus --slack seconds of
training's last step, and the matrix says "ended". Every run has its own
deadline (--run-timeout); a run still going then is a HANG.

Prints one line per run and the matrix (fault, expected, observed, time to
error, verdict) as a Markdown table; writes each run's output and a JSON
summary to --out. Exit status: 0 when every run gave what was expected, 1
otherwise, 77 when it cannot run here (not root, no namespaces, no mpirun).

Example (as root, from the repository root):
  scripts/fault_matrix.py --build build --comm-timeout 20
  scripts/fault_matrix.py --faults down,flap,stop --ranks-per-host 2
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
CLUSTER = os.path.join(HERE, "netns_cluster")
RSH = os.path.join(HERE, "netns_rsh")
PSD_RUN = os.path.join(HERE, "psd_run")
SUBNET = "10.77.0.0/24"
SKIP = 77

SURVIVE = "survives"
ENDS = "ends with an error"
# A flap is ridden out when --comm_timeout exceeds the outage plus TCP's
# recovery (docs/reliability.md, "What happens underneath"); the contract
# also accepts a job that ends as for ENDS, naming a rank.
SURVIVE_OR_NAMED = "survives (or ends naming a rank)"

FAULTS = {
    "loss1": ("1% loss each way", SURVIVE),
    "loss10": ("10% loss each way", SURVIVE),
    "delay": ("50 ms delay, 10 ms jitter, each way", SURVIVE),
    "flap": ("link down {flap:g} s, then up", SURVIVE_OR_NAMED),
    "down": ("link down for good", ENDS),
    "stop_brief": ("rank SIGSTOP {stop:g} s, then SIGCONT", SURVIVE),
    "stop": ("rank SIGSTOP for good", ENDS),
    "kill": ("rank SIGKILL", ENDS),
}

ITER_RE = re.compile(r"Iteration (\d+)")
ERROR_RE = re.compile(r"^Error: rank (\d+) of \d+: (.*)")
TERM_RE = re.compile(r"poseidon_train: rank (\d+) of \d+: stopped by")
# What a stack trace or a crash report looks like: glog's failure handler,
# Open MPI's signal handler, a CHECK failure, an abort or a segfault.
TRACE_RE = re.compile(r"\*\*\* (Aborted at|SIGTERM|SIGSEGV|SIGABRT|Process "
                      r"received signal)|Check failure stack trace|"
                      r"\[ *\d+\] \S+\(\+0x|Segmentation fault|"
                      r"terminate called")


def sh(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, **kw)


class Run:
    """One mpirun job in the cluster; its output lines with arrival times."""

    def __init__(self, cmd, env, log_path, cwd):
        self.lines = []  # (monotonic time, line)
        self.cond = threading.Condition()
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True,
                                     env=env, stdin=subprocess.DEVNULL,
                                     cwd=cwd,
                                     start_new_session=True, errors="replace")
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            now = time.monotonic()
            self.log.write("[%.3f] %s" % (now, line))
            self.log.flush()
            with self.cond:
                self.lines.append((now, line.rstrip("\n")))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def last_iteration(self):
        with self.cond:
            for _, line in reversed(self.lines):
                m = ITER_RE.search(line)
                if m:
                    return int(m.group(1))
        return -1

    def wait_for(self, predicate, deadline):
        """Waits until predicate() or the process ends or the deadline."""
        with self.cond:
            while not predicate():
                if self.proc.poll() is not None and not self.reader.is_alive():
                    return predicate()
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 0.5))
        return True

    def wait_exit(self, deadline):
        """mpirun's status, or None when it is still running at deadline."""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.reader.join(5)
                return self.proc.returncode
            time.sleep(0.2)
        return None

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.reader.join(5)

    def close(self):
        self.log.close()


def a_lines(res):
    """Iterations a survived run had to add after the fault."""
    return res.get("progress_iters", 0)


class Matrix:
    def __init__(self, args):
        self.args = args
        self.prefix = "fm%dx" % os.getpid()
        self.train = os.path.join(args.build, "tools", "poseidon_train")
        self.hosts = []
        self.results = []

    # ---- the cluster ---------------------------------------------------------
    def cluster(self, *words):
        return sh([CLUSTER] + list(words) + ["--prefix", self.prefix])

    def up(self):
        # Namespaces of an earlier run killed before it could remove them.
        stale = set(re.findall(r"^fm(\d+)x(?:hub|\d+)\b",
                               sh(["ip", "netns", "list"]).stdout, re.M))
        for pid in stale:
            if not os.path.exists("/proc/%s" % pid):
                print("removing namespaces left by an earlier run (fm%sx)"
                      % pid)
                sh([CLUSTER, "down", "--prefix", "fm%sx" % pid])
        r = self.cluster("up", str(self.args.hosts), "--rate", self.args.rate)
        if r.returncode != 0:
            if "not permitted" in r.stdout:
                print("SKIP fault_matrix: network namespaces are not "
                      "permitted here")
                sys.exit(SKIP)
            sys.exit("netns_cluster up failed:\n" + r.stdout)
        self.hosts = self.cluster("hosts").stdout.split()

    def down(self):
        self.cluster("down")

    def ranks(self):
        """[(rank, pid, namespace, state)] of the ranks running now."""
        out = []
        for line in self.cluster("ranks").stdout.splitlines()[1:]:
            f = line.split()
            if len(f) >= 5 and f[0].isdigit():
                out.append((int(f[0]), int(f[1]), f[3], f[4]))
        return out

    def leftovers(self):
        """Pids and names of processes still in the host namespaces."""
        left = []
        for i in range(len(self.hosts)):
            ns = "%s%d" % (self.prefix, i)
            pids = sh(["ip", "netns", "pids", ns]).stdout.split()
            for pid in pids:
                try:
                    with open("/proc/%s/comm" % pid) as f:
                        name = f.read().strip()
                except OSError:
                    continue
                if name != "netns_delay" and not name.startswith("python"):
                    left.append("%s(%s) on host %d" % (name, pid, i))
        return left

    def reset(self):
        """Every link up and clean, no process left in the hosts."""
        for i in range(len(self.hosts)):
            self.cluster("link", str(i), "up")
            self.cluster("netem", str(i), "clear")
            ns = "%s%d" % (self.prefix, i)
            for pid in sh(["ip", "netns", "pids", ns]).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass

    # ---- one run -------------------------------------------------------------
    def solver(self, work):
        data = os.path.join(REPO_ROOT, "data", "fashion_mnist")
        net = open(os.path.join(REPO_ROOT, "examples", "fashion_mnist",
                                "caffe_lenet_train_test.prototxt")).read()
        net = net.replace("batch_size: 64", "batch_size: %d" % self.args.batch,
                          1)
        net = net.replace("data/fashion_mnist", data)
        with open(os.path.join(work, "lenet.prototxt"), "w") as f:
            f.write(net)
        path = os.path.join(work, "solver.prototxt")
        with open(path, "w") as f:
            f.write('net: "%s"\n' % os.path.join(work, "lenet.prototxt") +
                    "test_iter: 1\ntest_interval: 100000000\n"
                    "test_initialization: false\n"
                    "base_lr: 0.01\nmomentum: 0.9\nweight_decay: 0.0005\n"
                    'lr_policy: "inv"\ngamma: 0.0001\npower: 0.75\n'
                    "display: %d\nmax_iter: 100000000\nsnapshot: 0\n"
                    "snapshot_after_train: false\n"
                    'snapshot_prefix: "%s"\nsolver_mode: CPU\nrandom_seed: 1\n'
                    % (self.args.display, os.path.join(work, "lenet")))
        return path

    def launch(self, solver, work):
        """The command that starts the job: psd_run (what users run, with
        its --abort-grace), or plain mpirun with --launcher mpirun."""
        per = self.args.ranks_per_host
        mpi_args = ["--allow-run-as-root", "--mca", "plm_rsh_agent", RSH,
                    "--mca", "plm_rsh_no_tree_spawn", "1", "--mca", "btl",
                    "tcp,self", "--mca", "btl_tcp_if_include", SUBNET,
                    "--mca", "oob_tcp_if_include", SUBNET, "--bind-to",
                    "none", "-x", "POSEIDON_NUM_THREADS", "-x",
                    "OPENBLAS_NUM_THREADS"]
        train = [self.train, "train", "--solver=" + solver,
                 "--comm_timeout=%d" % self.args.comm_timeout]
        train += self.args.train_args
        env = dict(os.environ, NETNS_CLUSTER_PREFIX=self.prefix,
                   POSEIDON_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        if self.args.launcher == "psd_run":
            config = os.path.join(work, "cluster.json")
            with open(config, "w") as f:
                json.dump({"worker_nodes": [h for h in self.hosts
                                            for _ in range(per)]}, f)
            cmd = [PSD_RUN, "-c", config, "--abort-grace",
                   str(self.args.abort_grace),
                   "--mpirun-args=" + " ".join(mpi_args)] + train
        else:
            hostlist = ",".join("%s:%d" % (h, per) for h in self.hosts)
            cmd = ["mpirun"] + mpi_args + ["--map-by", "slot", "-x", "PATH"]
            if os.environ.get("LD_LIBRARY_PATH"):
                cmd += ["-x", "LD_LIBRARY_PATH"]
            cmd += ["-H", hostlist, "-np", str(per * len(self.hosts))] + train
        return [CLUSTER, "exec", "--prefix", self.prefix] + cmd, env

    def victim(self):
        """(rank, pid) of the highest rank on the last host."""
        last = "%s%d" % (self.prefix, len(self.hosts) - 1)
        mine = [(r, p) for r, p, ns, _ in self.ranks() if ns == last]
        return max(mine) if mine else (None, None)

    def host_ranks(self, host):
        """The ranks running on host index `host` (psd_run and --map-by
        slot: ranks_per_host consecutive ranks per host)."""
        per = self.args.ranks_per_host
        return list(range(host * per, (host + 1) * per))

    def run_one(self, name, work, attempt=0):
        a = self.args
        what, expected = FAULTS[name]
        what = what.format(flap=a.flap_seconds, stop=a.stop_seconds)
        # The job runs in its folder: psd_run leaves poseidon_run.log and
        # its poseidon_log_<timestamp>/ where it is started.
        work = os.path.abspath(work)
        solver = self.solver(work)
        cmd, env = self.launch(solver, work)
        log_path = os.path.join(
            a.out, name + (".%d" % (attempt + 1) if attempt else "") + ".log")
        print("==== %s: %s (expected: %s)" % (name, what, expected),
              flush=True)
        t_start = time.monotonic()
        run = Run(cmd, env, log_path, work)
        res = {"fault": name, "what": what, "expected": expected,
               "log": log_path}
        try:
            self._drive(run, name, expected, res, t_start)
        finally:
            if run.proc.poll() is None:
                run.kill()
            res["leftovers"] = self.leftovers()
            if name == "down" and res["leftovers"]:
                # Stranded behind the cut link; they learn that the job is
                # gone once the link is back.
                self.cluster("link", str(len(self.hosts) - 1), "up")
                t_up = time.monotonic()
                while self.leftovers() and time.monotonic() - t_up < 30:
                    time.sleep(0.5)
                res["stranded"] = res["leftovers"]
                res["leftovers"] = self.leftovers()
                res["stranded_exit_s"] = (round(time.monotonic() - t_up, 1)
                                          if not res["leftovers"] else None)
            self.reset()
            run.close()
        self._judge(run, res)
        print("     %s: %s" % (res["verdict"], res["observed"]), flush=True)
        self.results.append(res)

    def _drive(self, run, name, expected, res, t_start):
        a = self.args
        deadline = t_start + a.run_timeout
        # Training under way: rank 0 has logged a few display lines.
        warm = a.display * 2
        if not run.wait_for(lambda: run.last_iteration() >= warm,
                            t_start + a.start_timeout):
            res["status"] = run.proc.poll()
            res["setup_failed"] = True
            return
        victim_host = len(self.hosts) - 1
        vrank, vpid = self.victim()
        res["victim_host"] = self.hosts[victim_host]
        res["victim_host_ranks"] = self.host_ranks(victim_host)
        res["victim_rank"] = vrank
        res["iter_at_fault"] = run.last_iteration()
        t_fault = time.monotonic()
        res["t_fault"] = t_fault
        host = str(victim_host)
        ok = True
        if name in ("loss1", "loss10", "delay"):
            args = {"loss1": ["loss", "1%"], "loss10": ["loss", "10%"],
                    "delay": ["delay", "50ms", "10ms"]}[name]
            r = self.cluster("netem", host, *args)
            ok = r.returncode == 0
            if ok:
                time.sleep(a.fault_seconds)
                res["iters_during_fault"] = (run.last_iteration() -
                                             res["iter_at_fault"])
                self.cluster("netem", host, "clear")
            else:
                res["inject_error"] = r.stdout.strip()
        elif name in ("flap", "down"):
            ok = self.cluster("link", host, "down").returncode == 0
            if name == "flap" and ok:
                time.sleep(a.flap_seconds)
                self.cluster("link", host, "up")
        elif name in ("stop", "stop_brief", "kill"):
            sig = {"stop": "STOP", "stop_brief": "STOP", "kill": "KILL"}[name]
            if vrank is None:
                ok = False
                res["inject_error"] = "no rank found on the last host"
            else:
                ok = self.cluster("signal", str(vrank), sig).returncode == 0
                if name == "stop_brief" and ok:
                    time.sleep(a.stop_seconds)
                    self.cluster("signal", str(vrank), "CONT")
        t_end_fault = time.monotonic()
        if not ok:
            res["status"] = run.proc.poll()
            res["inject_failed"] = True
            return
        if expected in (SURVIVE, SURVIVE_OR_NAMED):
            # Training must move on past the fault, then stop on SIGINT.
            after = run.last_iteration()
            res["iter_after_fault"] = after
            target = after + a.display * a.progress_lines
            res["progress_iters"] = a.display * a.progress_lines
            moved = run.wait_for(lambda: run.last_iteration() >= target,
                                 deadline)
            res["progressed"] = moved
            if moved:
                res["recovery_s"] = time.monotonic() - t_end_fault
                self.cluster("signal", "0", "INT")
        status = run.wait_exit(deadline)
        res["status"] = status
        res["hang"] = status is None
        res["t_exit"] = time.monotonic() if status is not None else None

    def _judge(self, run, res):
        a = self.args
        lines = run.lines
        t_fault = res.get("t_fault")
        errors = []
        for t, line in lines:
            m = ERROR_RE.match(line)
            if m:
                errors.append((t, int(m.group(1)), m.group(2)))
        res["errors"] = [{"rank": r, "message": msg,
                          "after_fault_s": round(t - t_fault, 1)
                          if t_fault else None} for t, r, msg in errors]
        res["term_lines"] = sum(1 for _, l in lines if TERM_RE.search(l))
        traces = [l for _, l in lines if TRACE_RE.search(l)]
        res["traces"] = traces[:5]
        res["mpirun"] = [l.strip() for _, l in lines
                         if not l.startswith("psd_run:") and
                         re.search(r"mpirun (noticed|has exited|was unable)"
                                   r"|MPI_ABORT was invoked|ORTE has lost|"
                                   r"btl_tcp|lost communication", l)][:6]
        res["launcher"] = [l.strip() for _, l in lines
                           if l.startswith("psd_run: mpirun is still")]
        if t_fault and res.get("t_exit"):
            res["exit_after_fault_s"] = round(res["t_exit"] - t_fault, 1)
        first = errors[0] if errors else None
        if first and t_fault:
            res["time_to_error_s"] = round(first[0] - t_fault, 1)
        # Which ranks the errors blame: "rank k" inside the message.
        named = set()  # ranks an error names, other than its own
        for _, r, msg in errors:
            named.update(set(int(x) for x in re.findall(r"rank (\d+)", msg))
                         - {r})
        res["named"] = sorted(named)
        problems = []
        res["notes"] = []
        if res.get("setup_failed"):
            problems.append("training never got under way (status %s)"
                            % res.get("status"))
        elif res.get("inject_failed"):
            problems.append("could not inject the fault: %s"
                            % res.get("inject_error", "?"))
        elif res.get("hang"):
            problems.append("HANG: mpirun still running %d s after start"
                            % a.run_timeout)
        if traces:
            problems.append("stack trace or crash report: %s" % traces[0][:80])
        survived = (res.get("progressed") and res.get("status") == 0 and
                    not errors)
        if res["expected"] == SURVIVE_OR_NAMED and not problems:
            if survived:
                res["outcome"] = "survived"
            else:
                res["outcome"] = "ended"
                res["notes"].append("ended instead of surviving")
                limit = a.comm_timeout + a.slack
                last_step = max((t for t, l in lines if ITER_RE.search(l)),
                                default=t_fault)
                if not errors:
                    problems.append("training stopped and no 'Error: rank "
                                    "k' line followed")
                elif not named:
                    problems.append("no error names another rank")
                elif errors[0][0] - last_step > limit:
                    problems.append("first error %.1f s after training's "
                                    "last step, over %d s"
                                    % (errors[0][0] - last_step, limit))
                elif res.get("t_exit", 1e18) - last_step > limit + a.slack:
                    problems.append("job ended %.1f s after training's last "
                                    "step, over %d s"
                                    % (res.get("t_exit", -1) - last_step,
                                       limit + a.slack))
        if res["expected"] == SURVIVE and not problems:
            if not res.get("progressed"):
                problems.append("training did not move on after the fault")
            elif res.get("status") != 0:
                problems.append("exit status %s after SIGINT" % res["status"])
            elif errors:
                problems.append("error: %s" % errors[0][2][:100])
        elif res["expected"] == ENDS and not problems:
            limit = (a.slack if res["fault"] == "kill"
                     else a.comm_timeout + a.slack)
            if res.get("status") == 0:
                problems.append("exit status 0")
            if res["fault"] in ("stop", "kill"):
                want = {res.get("victim_rank")}
            else:
                want = set(res.get("victim_host_ranks", []))
            if res["fault"] != "kill":
                first_named = set(int(x) for x in re.findall(
                    r"rank (\d+)", errors[0][2])) - {errors[0][1]} \
                    if errors else set()
                if errors and not (first_named & want):
                    # Printed first, but not necessarily first in time: ranks
                    # abort at once and their lines race to mpirun.
                    res["notes"].append("first error line names rank(s) %s"
                                        % sorted(first_named))
                if not errors:
                    problems.append("no 'Error: rank k' line")
                elif not (named & want):
                    problems.append("no error names rank(s) %s (named: %s)"
                                    % (sorted(want), sorted(named)))
                elif res.get("time_to_error_s", 1e9) > limit:
                    problems.append("first error %.1f s after the fault, "
                                    "over %d s" % (res["time_to_error_s"],
                                                   limit))
            if res.get("exit_after_fault_s", 1e9) > limit + a.slack:
                problems.append("job ended %.1f s after the fault, over %d s"
                                % (res.get("exit_after_fault_s", -1),
                                   limit + a.slack))
            if res["fault"] == "kill" and not any(
                    "rank %d" % res.get("victim_rank", -1) in l
                    for l in res["mpirun"] + [e[2] for e in errors]):
                problems.append("neither mpirun nor an error names the "
                                "killed rank %s" % res.get("victim_rank"))
        if res["fault"] == "stop":
            for _, r, msg in errors:
                if r == res.get("victim_rank") and "itself stopped" not in msg:
                    problems.append("the stopped rank %d blames others: %s"
                                    % (r, msg[:120]))
        if res.get("leftovers"):
            problems.append("processes left in the hosts after mpirun: %s"
                            % " ".join(res["leftovers"]))
        res["problems"] = problems
        res["verdict"] = "HANG" if res.get("hang") else (
            "ok" if not problems else "FAIL")
        res["observed"] = self._observed(res)

    @staticmethod
    def _observed(res):
        if res.get("setup_failed") or res.get("inject_failed"):
            return "; ".join(res["problems"])
        parts = []
        if res["expected"] in (SURVIVE, SURVIVE_OR_NAMED):
            during = res.get("iter_after_fault", 0) - res.get("iter_at_fault",
                                                                0)
            if res.get("progressed"):
                parts.append("trained on: %d iterations during the fault, "
                             "%d more %.1f s after it" % (
                                 during, a_lines(res), res["recovery_s"]))
            else:
                parts.append("%d iterations during the fault, none after"
                             % during)
            parts.append("exit %s" % res.get("status"))
        else:
            parts.append("exit %s" % res.get("status"))
        for e in res["errors"][:3]:
            parts.append("rank %d at +%ss: %s" % (e["rank"], e["after_fault_s"],
                                                  e["message"][:160]))
        if len(res["errors"]) > 3:
            parts.append("%d more error lines" % (len(res["errors"]) - 3))
        if res["term_lines"]:
            parts.append("%d SIGTERM one-liners" % res["term_lines"])
        for m in res["mpirun"][:2]:
            parts.append("mpirun: %s" % m[:120])
        if res["launcher"]:
            parts.append("psd_run ended mpirun (--abort-grace)")
        if res.get("exit_after_fault_s") is not None:
            parts.append("job ended +%ss" % res["exit_after_fault_s"])
        if res.get("stranded"):
            parts.append("left behind the cut: %s, %s" % (
                " ".join(res["stranded"]),
                "gone %.1f s after the link came back"
                % res["stranded_exit_s"] if res.get("stranded_exit_s")
                is not None else "still there 30 s after the link came back"))
        parts.extend(res.get("notes", []))
        parts.extend(p for p in res["problems"] if p not in parts)
        return "; ".join(parts)

    # ---- the table -----------------------------------------------------------
    def table(self):
        a = self.args
        rows = ["| fault | expected | observed | time to error | verdict |",
                "|---|---|---|---|---|"]
        for r in self.results:
            tte = r.get("time_to_error_s")
            tte = "%.1f s" % tte if tte is not None else "-"
            rows.append("| %s | %s | %s | %s | %s |" % (
                r["what"], r["expected"], r["observed"].replace("|", "/"),
                tte, r["verdict"]))
        head = ("%d hosts x %d ranks, LeNet batch %d per rank, links %s, "
                "--comm_timeout=%d" % (a.hosts, a.ranks_per_host, a.batch,
                                       a.rate, a.comm_timeout))
        return head + "\n\n" + "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.split("\n")[2:]))
    ap.add_argument("--build", default=os.path.join(REPO_ROOT, "build"))
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--ranks-per-host", type=int, default=1)
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--display", type=int, default=10,
                    help="rank 0 logs every this many iterations")
    ap.add_argument("--comm-timeout", type=int, default=20)
    ap.add_argument("--slack", type=int, default=15,
                    help="seconds allowed beyond --comm-timeout")
    ap.add_argument("--fault-seconds", type=float, default=10)
    ap.add_argument("--flap-seconds", type=float, default=3)
    ap.add_argument("--stop-seconds", type=float, default=5)
    ap.add_argument("--progress-lines", type=int, default=2)
    ap.add_argument("--start-timeout", type=float, default=120)
    ap.add_argument("--run-timeout", type=float, default=0,
                    help="per run; default: start + 3 x comm timeout + 60")
    ap.add_argument("--launcher", choices=("psd_run", "mpirun"),
                    default="psd_run")
    ap.add_argument("--abort-grace", type=float, default=10,
                    help="psd_run's --abort-grace")
    ap.add_argument("--attempts", type=int, default=1,
                    help="runs of a fault that did not give what was "
                    "expected, at most (the failures stay in the table as "
                    "'FAIL, retried')")
    ap.add_argument("--out", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("train_args", nargs="*",
                    help="more poseidon_train flags (after --)")
    args = ap.parse_args()
    faults = [f for f in args.faults.split(",") if f]
    for f in faults:
        if f not in FAULTS:
            sys.exit("unknown fault '%s' (want %s)" % (f, ", ".join(FAULTS)))
    if not args.run_timeout:
        args.run_timeout = args.start_timeout + 3 * args.comm_timeout + 60
    if os.geteuid() != 0:
        print("SKIP fault_matrix: needs root (network namespaces)")
        return SKIP
    for tool in ("ip", "tc", "mpirun"):
        if shutil.which(tool) is None:
            print("SKIP fault_matrix: '%s' not found" % tool)
            return SKIP
    if not re.search(r"Open MPI|OpenRTE", sh(["mpirun", "--version"]).stdout):
        print("SKIP fault_matrix: mpirun is not Open MPI's (the rsh agent "
              "is Open MPI's plm_rsh)")
        return SKIP
    args.build = os.path.abspath(args.build)
    if not os.access(os.path.join(args.build, "tools", "poseidon_train"),
                     os.X_OK):
        sys.exit("no %s/tools/poseidon_train (build first)" % args.build)
    r = sh(["bash", os.path.join(REPO_ROOT, "examples", "fashion_mnist",
                                 "create_fashion_mnist.sh")],
           env=dict(os.environ, BUILD_DIR=args.build))
    if r.returncode != 0:
        sys.exit("could not convert Fashion-MNIST:\n" + r.stdout)
    own_out = not args.out
    args.out = args.out or tempfile.mkdtemp(prefix="poseidon_faults.")
    os.makedirs(args.out, exist_ok=True)
    matrix = Matrix(args)
    # The namespaces go whatever ends this script.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, _: sys.exit(128 + s))
    try:
        matrix.up()
        print("cluster %s: hosts %s, logs in %s" % (
            matrix.prefix, " ".join(matrix.hosts), args.out), flush=True)
        for name in faults:
            for attempt in range(args.attempts):
                with tempfile.TemporaryDirectory(dir=args.out) as work:
                    matrix.run_one(name, work, attempt)
                last = matrix.results[-1]
                if last["verdict"] != "FAIL" or attempt + 1 == args.attempts:
                    break
                # See --attempts: kept in the table and the JSON.
                last["verdict"] = "FAIL, retried"
                print("     %s failed; attempt %d of %d (--attempts)" % (
                    name, attempt + 2, args.attempts), flush=True)
    finally:
        matrix.down()
    print()
    print(matrix.table())
    summary = os.path.join(args.out, "fault_matrix.json")
    with open(args.json or summary, "w") as f:
        json.dump({"args": vars(args), "results": matrix.results}, f,
                  indent=1, default=str)
    bad = [r["fault"] for r in matrix.results
           if r["verdict"] not in ("ok", "FAIL, retried")]
    retried = [r["fault"] for r in matrix.results
               if r["verdict"] == "FAIL, retried"]
    print("\n%d runs, %d as expected%s%s" % (
        len(matrix.results), len(matrix.results) - len(bad) - len(retried),
        "; not as expected: " + ", ".join(bad) if bad else "",
        "; failed, then retried: " + ", ".join(retried) if retried else ""))
    if own_out and not bad:
        pass  # keep the logs: they are the evidence
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
