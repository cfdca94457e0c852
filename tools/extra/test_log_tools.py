"""Tests of tools/extra/parse_log.py, parse_log.sh and plot_training_log.py
on a real poseidon_train log (a short LeNet run on Fashion-MNIST, made once
per session) and on a log in BVLC Caffe's format.

Run by CTest (log_tools) with POSEIDON_TRAIN naming the binary, after the
Fashion-MNIST LMDBs are made; by hand:

    POSEIDON_TRAIN=build/tools/poseidon_train python3 -m pytest \\
        tools/extra/test_log_tools.py
"""
import csv
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import parse_log  # noqa: E402

PARSE_LOG = os.path.join(HERE, 'parse_log.py')
PARSE_LOG_SH = os.path.join(HERE, 'parse_log.sh')
PLOT = os.path.join(HERE, 'plot_training_log.py')
NUM = r'([-+]?[0-9.]+(?:e[-+]?[0-9]+)?|nan)'


def run(args, **kwargs):
    return subprocess.run(args, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True,
                          **kwargs)


@pytest.fixture(scope='module')
def real_log(tmp_path_factory):
    """A poseidon_train log: 300 iterations, display every 50, a test every
    100 (10 batches), the learning rate divided by 10 at 200."""
    train = os.environ.get('POSEIDON_TRAIN',
                           os.path.join(ROOT, 'build', 'tools',
                                        'poseidon_train'))
    if not os.access(train, os.X_OK):
        pytest.skip('no poseidon_train at %s (set POSEIDON_TRAIN)' % train)
    lmdb = os.path.join(ROOT, 'data', 'fashion_mnist',
                        'fashion_mnist_train_lmdb')
    if not os.path.isdir(lmdb):
        pytest.skip('no Fashion-MNIST LMDB (run examples/fashion_mnist/'
                    'create_fashion_mnist.sh)')
    work = tmp_path_factory.mktemp('log')
    solver = work / 'solver.prototxt'
    solver.write_text(
        'net: "examples/fashion_mnist/lenet_train_test.prototxt"\n'
        'test_iter: 10 test_interval: 100 base_lr: 0.01 momentum: 0.9\n'
        'lr_policy: "multistep" gamma: 0.1 stepvalue: 200\n'
        'weight_decay: 0.0005 display: 50 max_iter: 300 snapshot: 0\n'
        'snapshot_prefix: "%s/lenet" random_seed: 1 solver_mode: CPU\n'
        % work)
    log = work / 'lenet.log'
    with open(str(log), 'w') as out:
        status = subprocess.call([train, 'train', '--solver=%s' % solver],
                                 stdout=out, stderr=subprocess.STDOUT,
                                 cwd=ROOT)
    assert status == 0, log.read_text()[-3000:]
    return str(log)


def grep(path, pattern):
    """Every match of `pattern` in the log, in order (groups as tuples)."""
    with open(path) as f:
        return [m.groups() for m in (re.search(pattern, line) for line in f)
                if m]


def read_csv(path, delimiter=','):
    with open(path) as f:
        return list(csv.DictReader(f, delimiter=delimiter))


# ---- parse_log.py on poseidon_train's log ---------------------------------------

def test_parse_log_writes_caffes_two_csv_files(real_log, tmp_path):
    result = run([sys.executable, PARSE_LOG, '--verbose', real_log,
                  str(tmp_path)])
    assert result.returncode == 0, result.stderr
    assert 'lenet.log.train' in result.stdout
    train = read_csv(str(tmp_path / 'lenet.log.train'))
    test = read_csv(str(tmp_path / 'lenet.log.test'))
    assert list(train[0].keys()) == ['NumIters', 'Seconds', 'LearningRate',
                                     'loss']
    assert list(test[0].keys()) == ['NumIters', 'Seconds', 'LearningRate',
                                    'accuracy', 'loss']

    # The rows hold what the log says, line for line.
    displayed = grep(real_log, r'Iteration (\d+) \(.*\), loss = ')
    train_losses = grep(real_log, r'Train net output #0: loss = ' + NUM)
    assert [int(r['NumIters']) for r in train] == [
        int(i) for (i,) in displayed[:len(train)]]
    assert [int(r['NumIters']) for r in train] == list(range(0, 300, 50))
    assert [float(r['loss']) for r in train] == [
        float(v) for (v,) in train_losses]
    accuracies = grep(real_log, r'Test net output #0: accuracy = ' + NUM)
    assert [int(r['NumIters']) for r in test] == [0, 100, 200, 300]
    assert [float(r['accuracy']) for r in test] == [
        float(v) for (v,) in accuracies]
    # Trained for 300 iterations the net is far better than chance.
    assert float(test[-1]['accuracy']) > 0.5

    # The learning rate of each row, 0.01 until the step at 200.
    rates = {int(r['NumIters']): float(r['LearningRate']) for r in train}
    assert rates[0] == rates[150] == pytest.approx(0.01)
    assert rates[200] == rates[250] == pytest.approx(0.001)
    # Seconds since "Solving": from 0, never decreasing.
    seconds = [float(r['Seconds']) for r in train]
    assert 0 <= seconds[0] < 5
    assert seconds == sorted(seconds) and seconds[-1] > seconds[0]


def test_parse_log_delimiter_and_module_api(real_log, tmp_path):
    result = run([sys.executable, PARSE_LOG, '--delimiter', '\t', real_log,
                  str(tmp_path)])
    assert result.returncode == 0, result.stderr
    rows = read_csv(str(tmp_path / 'lenet.log.test'), delimiter='\t')
    assert len(rows) == 4
    train_rows, test_rows = parse_log.parse_log(real_log)
    assert [r['NumIters'] for r in test_rows] == [0, 100, 200, 300]
    losses = parse_log.parse_display_losses(real_log)
    # Every display line, including the last iteration's.
    assert [it for it, _, _ in losses] == list(range(0, 301, 50))


def test_the_log_ends_with_the_summary_line(real_log):
    with open(real_log) as f:
        last = [line for line in f if 'Training done:' in line][-1]
    accuracy = grep(real_log, r'Test net output #0: accuracy = ' + NUM)[-1][0]
    assert re.search(r'Training done: 300 iterations in [0-9.]+ s \(\d+ '
                     r'images/s\); test: accuracy = %s, loss = ' %
                     re.escape(accuracy), last), last
    assert 'last snapshot: ' in last and last.rstrip().endswith(
        'lenet_iter_300.solverstate')


def test_parse_log_sh_writes_the_legacy_tables(real_log, tmp_path):
    result = run(['bash', PARSE_LOG_SH, real_log], cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    train = (tmp_path / 'lenet.log.train').read_text().splitlines()
    test = (tmp_path / 'lenet.log.test').read_text().splitlines()
    assert train[0].split() == ['#Iters', 'Seconds', 'TrainingLoss',
                                'LearningRate']
    assert test[0].split() == ['#Iters', 'Seconds', 'TestAccuracy',
                               'TestLoss']
    assert [int(line.split()[0]) for line in train[1:]] == list(
        range(0, 301, 50))
    accuracies = grep(real_log, r'Test net output #0: accuracy = ' + NUM)
    assert [float(line.split()[2]) for line in test[1:]] == [
        float(v) for (v,) in accuracies]


# ---- plot_training_log.py -----------------------------------------------------------

@pytest.mark.parametrize('chart', range(10))
def test_plot_training_log_draws_every_chart_type(real_log, tmp_path, chart):
    pytest.importorskip('matplotlib')
    png = tmp_path / ('chart%d.png' % chart)
    result = run([sys.executable, PLOT, str(chart), str(png), real_log,
                  real_log])
    assert result.returncode == 0, result.stderr
    data = png.read_bytes()
    assert data.startswith(b'\x89PNG\r\n\x1a\n') and len(data) > 5000


def test_plot_training_log_arguments(real_log, tmp_path):
    usage = run([sys.executable, PLOT])
    assert usage.returncode != 0
    assert 'Test accuracy  vs. Iters' in usage.stderr
    bad = run([sys.executable, PLOT, '12', str(tmp_path / 'a.png'), real_log])
    assert bad.returncode != 0 and '12 is not a valid chart type' in bad.stderr
    not_png = run([sys.executable, PLOT, '0', str(tmp_path / 'a.jpg'),
                   real_log])
    assert not_png.returncode != 0 and '.png' in not_png.stderr
    missing = run([sys.executable, PLOT, '0', str(tmp_path / 'a.png'),
                   str(tmp_path / 'missing.log')])
    assert missing.returncode != 0 and 'missing.log' in missing.stderr


# ---- Caffe's log format -------------------------------------------------------------------

# BVLC Caffe's lines (glog prefix without the year; older display lines
# without the rate; a second test net; a run across New Year).
CAFFE_LOG = """\
I1231 23:59:58.000000  1234 solver.cpp:228] Solving LeNet
I1231 23:59:58.000000  1234 solver.cpp:229] Learning Rate Policy: inv
I1231 23:59:58.100000  1234 solver.cpp:338] Iteration 0, Testing net (#0)
I1231 23:59:58.500000  1234 solver.cpp:406]     Test net output #0: accuracy = 0.0931
I1231 23:59:58.500000  1234 solver.cpp:406]     Test net output #1: loss = 2.30896 (* 1 = 2.30896 loss)
I1231 23:59:58.600000  1234 solver.cpp:338] Iteration 0, Testing net (#1)
I1231 23:59:58.700000  1234 solver.cpp:406]     Test net output #0: accuracy = 0.101
I1231 23:59:58.800000  1234 solver.cpp:219] Iteration 0 (0 iter/s, 0.7s/100 iters), loss = 2.3
I1231 23:59:58.800000  1234 solver.cpp:238]     Train net output #0: loss = 2.3 (* 1 = 2.3 loss)
I1231 23:59:58.800000  1234 sgd_solver.cpp:105] Iteration 0, lr = 0.01
I0101 00:00:01.300000  1234 solver.cpp:219] Iteration 100, loss = 0.25
I0101 00:00:01.300000  1234 solver.cpp:238]     Train net output #0: loss = 0.25 (* 1 = 0.25 loss)
I0101 00:00:01.300000  1234 sgd_solver.cpp:105] Iteration 100, lr = 0.00992565
I0101 00:00:02.000000  1234 solver.cpp:338] Iteration 200, Testing net (#0)
I0101 00:00:02.500000  1234 solver.cpp:406]     Test net output #0: accuracy = 0.9512
I0101 00:00:02.500000  1234 solver.cpp:406]     Test net output #1: loss = 0.15 (* 1 = 0.15 loss)
"""


def test_parse_log_reads_caffes_format(tmp_path):
    log = tmp_path / 'caffe.log'
    log.write_text(CAFFE_LOG)
    train, test = parse_log.parse_log(str(log))
    assert [(r['NumIters'], r['loss']) for r in train] == [(0, 2.3),
                                                           (100, 0.25)]
    assert train[1]['LearningRate'] == pytest.approx(0.00992565)
    # Across New Year: 00:00:01.3 is 3.3 s after 23:59:58.
    assert train[1]['Seconds'] == pytest.approx(3.3)
    assert [r['NumIters'] for r in test] == [0, 200]
    assert test[0]['accuracy'] == pytest.approx(0.0931)
    assert test[0]['loss'] == pytest.approx(2.30896)
    assert test[0]['accuracy_net1'] == pytest.approx(0.101)
    assert test[1]['accuracy'] == pytest.approx(0.9512)
    assert test[1]['Seconds'] == pytest.approx(4.5)
    assert [it for it, _, _ in parse_log.parse_display_losses(str(log))] == [
        0, 100]
    # The CSV of a test net's outputs keeps the columns of every row.
    assert run([sys.executable, PARSE_LOG, str(log),
                str(tmp_path)]).returncode == 0
    rows = read_csv(str(tmp_path / 'caffe.log.test'))
    assert list(rows[0].keys()) == ['NumIters', 'Seconds', 'LearningRate',
                                    'accuracy', 'loss', 'accuracy_net1']
    assert rows[1]['accuracy_net1'] == ''


def test_parse_log_rejects_what_is_not_a_training_log(tmp_path):
    log = tmp_path / 'notes.log'
    log.write_text('nothing to see\n')
    result = run([sys.executable, PARSE_LOG, str(log), str(tmp_path)])
    assert result.returncode != 0 and 'training log' in result.stderr
    result = run([sys.executable, PARSE_LOG, str(tmp_path / 'none.log'),
                  str(tmp_path)])
    assert result.returncode != 0 and 'none.log' in result.stderr
