#!/usr/bin/env python3
"""Fuzzes scripts/psd_run's handling of a cluster config.json.

Usage:
    fuzz_psd_run.py [--seconds N] [--seed S] [--corpus DIR] [--crashes DIR]

Every input is written as config.json and goes through what psd_run does
with it before launching anything: load_config, check_rank_order and
build_command (with --out and a command, as a user gives them). The
contract: either psd_run's ConfigError (its clear "psd_run: error: ..."
message and exit status 2), or an mpirun command that starts one rank per
worker node in psd_run's rank order (worker_nodes, the master's entries
first when master_node names a worker), then one per dedicated server node
(server_nodes other than the workers' hosts): -np is the number of those
ranks and the -H list splits back into exactly those host names. Anything else (another
exception, a traceback, a wrong command) is a finding; the input is saved
under --crashes and the script exits 1.

With atheris installed (scripts/install_python_deps.sh puts it in a Python
that pip may change) the inputs come from libFuzzer's coverage-guided
mutations; without it, from a built-in loop that mutates the seeds (JSON
structure and bytes) at random. Seeds: the configs of psd_run's own test
(src/poseidon/test/scripts/test_psd_run.sh), of the docs and of the
original Poseidon's tutorial.
"""

import argparse
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import random
import shlex
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

SEEDS = [
    # The original Poseidon's two examples, as its tutorial writes them.
    {"virtualenv": "/home/ubuntu/sandbox", "username": "ubuntu",
     "pem_file": "/path/to/pem-file.pem", "master_node": "localhost",
     "worker_nodes": ["192.168.1.11", "192.168.1.15"],
     "server_nodes": ["192.168.1.70", "192.168.1.80"]},
    {"pem_file": "cluster-key.pem", "worker_nodes": ["127.0.0.1"],
     "server_nodes": ["127.0.0.1"]},
    {"worker_nodes": ["localhost"]},
    {"worker_nodes": ["a", "b", "b", "c"], "master_node": "b"},
    {"worker_nodes": ["10.77.0.1", "10.77.0.2", "10.77.0.3"]},
    {"worker_nodes": ["h1", "h1", "h2"], "server_nodes": ["h1", "h1", "h2"],
     "master_node": "h1", "username": "user", "pem_file": "~/.ssh/key.pem",
     "virtualenv": "/opt/venvs/poseidon"},
    {"worker_nodes": ["a", "b"], "server_nodes": ["c"],
     "master_node": "a", "unknown": 1},
    {"worker_nodes": ["node-1.example.com", "node-2.example.com"],
     "virtualenv": "/home/user/env with space"},
]


def load_psd_run():
    path = os.path.join(ROOT, "scripts", "psd_run")
    loader = importlib.machinery.SourceFileLoader("psd_run", path)
    spec = importlib.util.spec_from_loader("psd_run", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


psd_run = load_psd_run()
WORK = tempfile.mkdtemp(prefix="psd_fuzz.")
CONFIG = os.path.join(WORK, "config.json")


class Finding(Exception):
    pass


def check_command(cmd, config):
    # The workers in rank order, then the dedicated servers' hosts.
    workers = config["workers"] + config["dedicated"]
    if cmd[:2] != ["mpirun", "-np"] or cmd[2] != str(len(workers)):
        raise Finding("-np does not give one rank per worker and dedicated "
                      "server: %r" % cmd[:3])
    if sorted(config["workers"]) != sorted(config["worker_nodes"]):
        raise Finding("the ranks' hosts %r are not the worker_nodes %r" %
                      (workers, config["worker_nodes"]))
    hosts = cmd[cmd.index("-H") + 1]
    if hosts.split(",") != workers:
        raise Finding("-H %r does not list the workers %r in order" %
                      (hosts, workers))
    for word in cmd:
        if not isinstance(word, str):
            raise Finding("a non-string word in the command: %r" % (word,))


def run_one(data):
    """Runs one input; raises Finding (or any unexpected exception)."""
    with open(CONFIG, "wb") as f:
        f.write(data)
    # psd_run prints warnings for unknown keys; keep the loop quiet.
    stderr, sys.stderr = sys.stderr, open(os.devnull, "w")
    try:
        try:
            config = psd_run.load_config(CONFIG)
            psd_run.check_rank_order(config["workers"], CONFIG)
            cmd = psd_run.build_command(
                config, ["poseidon_train train --solver=solver.prototxt"], [])
        except psd_run.ConfigError as e:
            if not str(e):
                raise Finding("a ConfigError without a message")
            return
    finally:
        sys.stderr.close()
        sys.stderr = stderr
    check_command(cmd, config)


def save(crashes, data, error):
    os.makedirs(crashes, exist_ok=True)
    name = os.path.join(crashes, "crash-" + hashlib.sha1(data).hexdigest())
    with open(name, "wb") as f:
        f.write(data)
    print("fuzz_psd_run: FINDING %s: %s: %s" %
          (name, type(error).__name__, error), file=sys.stderr)


def mutate_json(value, rng, depth=0):
    """A structure-aware mutation of a decoded JSON value."""
    choices = [
        lambda: "", lambda: " ", lambda: "a,b", lambda: "-np", lambda: "h\x00",
        lambda: "\u00e9h\u00f4te", lambda: 10 ** rng.randint(0, 400),
        lambda: -1.5, lambda: None, lambda: True, lambda: [], lambda: {},
        lambda: ["x"] * rng.randint(0, 5), lambda: "x" * rng.randint(0, 300),
        lambda: [[[]]] * 2, lambda: float("nan"),
    ]
    if depth > 4 or rng.random() < 0.2:
        return rng.choice(choices)()
    if isinstance(value, dict):
        value = dict(value)
        keys = list(value) + list(psd_run.KNOWN_KEYS)
        key = rng.choice(keys)
        if rng.random() < 0.2:
            value.pop(key, None)
        else:
            value[key] = mutate_json(value.get(key), rng, depth + 1)
        return value
    if isinstance(value, list):
        value = list(value)
        if value and rng.random() < 0.5:
            i = rng.randrange(len(value))
            value[i] = mutate_json(value[i], rng, depth + 1)
        elif value and rng.random() < 0.5:
            value.insert(rng.randrange(len(value) + 1), rng.choice(value))
        else:
            value.append(mutate_json(None, rng, depth + 1))
        return value
    return rng.choice(choices)()


def mutate_bytes(data, rng):
    data = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        op = rng.randrange(5)
        if op == 0 and data:
            del data[rng.randrange(len(data))]
        elif op == 1:
            data.insert(rng.randrange(len(data) + 1), rng.randrange(256))
        elif op == 2 and data:
            data[rng.randrange(len(data))] = rng.randrange(256)
        elif op == 3:
            data[rng.randrange(len(data) + 1):] = b"[" * rng.randint(1, 5000)
        elif op == 4 and data:
            i = rng.randrange(len(data))
            data[i:i] = data[i:i + rng.randint(1, 32)]
    return bytes(data)


def seed_inputs():
    inputs = [json.dumps(s).encode() for s in SEEDS]
    inputs += [b"", b"{", b"[]", b"null", b"\xff\xfe", b'{"worker_nodes": "h"}']
    return inputs


def builtin_loop(seconds, seed, crashes):
    rng = random.Random(seed)
    corpus = seed_inputs()
    executions = 0
    findings = 0
    deadline = time.time() + seconds
    while time.time() < deadline:
        base = rng.choice(corpus)
        if rng.random() < 0.6:
            try:
                data = json.dumps(mutate_json(json.loads(base), rng)).encode()
            except (ValueError, RecursionError):
                data = mutate_bytes(base, rng)
        else:
            data = mutate_bytes(base, rng)
        executions += 1
        try:
            run_one(data)
        except Exception as e:  # every other exception is a finding
            findings += 1
            save(crashes, data, e)
            continue
        if rng.random() < 0.05 and len(corpus) < 500:
            corpus.append(data)
    print("fuzz_psd_run: built-in loop: %d executions in %ds, %d findings"
          % (executions, seconds, findings))
    return 1 if findings else 0


def atheris_main(seconds, seed, corpus, crashes):
    import atheris
    os.makedirs(corpus, exist_ok=True)
    os.makedirs(crashes, exist_ok=True)
    for i, data in enumerate(seed_inputs()):
        with open(os.path.join(corpus, "seed%d.json" % i), "wb") as f:
            f.write(data)

    def test_one(data):
        try:
            run_one(data)
        except Exception as e:
            save(crashes, data, e)
            raise

    atheris.instrument_all()
    atheris.Setup([sys.argv[0], "-max_total_time=%d" % seconds,
                   "-seed=%d" % seed, "-print_final_stats=1",
                   "-artifact_prefix=%s/" % crashes, corpus], test_one)
    atheris.Fuzz()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--corpus", default=os.path.join(WORK, "corpus"))
    parser.add_argument("--crashes", default=os.path.join(WORK, "crashes"))
    parser.add_argument("--builtin", action="store_true",
                        help="use the built-in loop even if atheris exists")
    args = parser.parse_args()
    try:
        import atheris  # noqa: F401
        have_atheris = not args.builtin
    except ImportError:
        have_atheris = False
    if have_atheris:
        atheris_main(args.seconds, args.seed, args.corpus, args.crashes)
        return 0
    print("fuzz_psd_run: using the built-in loop (atheris %s)" %
          ("not wanted" if args.builtin else "is not installed"))
    return builtin_loop(args.seconds, args.seed, args.crashes)


if __name__ == "__main__":
    sys.exit(main())
