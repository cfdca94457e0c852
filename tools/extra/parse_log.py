#!/usr/bin/env python3
"""Turns a training log (poseidon_train's, or BVLC Caffe's) into two CSV
tables, with the arguments of Caffe's tools/extra/parse_log.py:

    parse_log.py [--verbose] [--delimiter D] LOGFILE OUTPUT_DIR

writes OUTPUT_DIR/<log name>.train and OUTPUT_DIR/<log name>.test. Each row
is one iteration at which the net's outputs were logged ("Train net output
#i: name = value" at each display, "Test net output #i: ..." at each test):

    NumIters,Seconds,LearningRate,<output name>,<output name>,...

Seconds counts from the "Solving" line (glog timestamps; the year, which
glog leaves out, is the log file's). LearningRate is the rate of that
iteration ("Iteration N, lr = ..."), or the nearest one logged. Outputs of a
second test net get "_net1" (etc.) appended to their names.

As a module: parse_log(path) -> (train_rows, test_rows), lists of
OrderedDicts; parse_display_losses(path) -> [(iteration, seconds, loss)]
of the "Iteration N ..., loss = X" lines (the smoothed loss); and
save_csv_files(...), write_csv(...) as in Caffe.

--legacy writes the space-separated tables of Caffe's parse_log.sh into the
current directory instead (see parse_log.sh).
"""
import argparse
import bisect
import csv
import datetime
import os
import re
import sys
from collections import OrderedDict

# glog's line prefix: severity, date (MMDD, or YYYYMMDD in newer glog) and
# time, e.g. "I0210 13:39:22.381027" (anywhere in the line, so prefixes
# such as mpirun's "[1,0]<stderr>:" are fine).
_GLOG_TIME = re.compile(
    r'(?<![0-9A-Za-z])[IWEF](\d{8}|\d{4}) (\d\d):(\d\d):(\d\d)\.(\d{1,6})')
_ITERATION = re.compile(r'Iteration (\d+)')
_NUMBER = r'([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf)'
_TRAIN_OUTPUT = re.compile(r'Train net output #(\d+): (\S+) = ' + _NUMBER)
_TEST_OUTPUT = re.compile(r'Test net output #(\d+): (\S+) = ' + _NUMBER)
_TESTING_NET = re.compile(r'Iteration (\d+), Testing net \(#(\d+)\)')
_LEARNING_RATE = re.compile(r'Iteration (\d+), lr = ' + _NUMBER)
_DISPLAY_LOSS = re.compile(r'Iteration (\d+)(?: \([^)]*\))?, loss = ' +
                           _NUMBER)


class _Clock(object):
    """Seconds since a start line, from glog timestamps that omit the year
    (taken from the file; a timestamp earlier in the year than the previous
    one means the log crossed New Year)."""

    def __init__(self, year):
        self.year = year
        self.last = None
        self.start = None

    def time_of(self, line):
        match = _GLOG_TIME.search(line)
        if not match:
            return None
        date, hour, minute, second, fraction = match.groups()
        if len(date) == 8:
            year, month, day = int(date[:4]), int(date[4:6]), int(date[6:])
        else:
            year, month, day = self.year, int(date[:2]), int(date[2:])
        try:
            stamp = datetime.datetime(
                year, month, day, int(hour), int(minute), int(second),
                int(fraction.ljust(6, '0')))
        except ValueError:
            return None
        if len(date) == 4 and self.last is not None and stamp < self.last:
            if (self.last - stamp).days > 180:
                self.year += 1
                stamp = stamp.replace(year=self.year)
        self.last = stamp
        return stamp

    def seconds(self, stamp):
        if stamp is None or self.start is None:
            return float('nan')
        return (stamp - self.start).total_seconds()


def _log_year(path):
    """The year the log was written (glog prints none): the file's."""
    try:
        return datetime.datetime.fromtimestamp(os.path.getmtime(path)).year
    except OSError:
        return datetime.datetime.now().year


def _scan(path):
    """Yields (line, seconds since start) for each line of the log."""
    clock = _Clock(_log_year(path))
    with open(path, errors='replace') as f:
        for line in f:
            stamp = clock.time_of(line)
            if clock.start is None and stamp is not None and (
                    'Solving' in line or _ITERATION.search(line)):
                clock.start = stamp
            yield line, clock.seconds(stamp)


def _finish_rows(rows, rates):
    """Fills each row's LearningRate from {iteration: rate}: that of its
    iteration, else of the nearest earlier iteration, else the first."""
    known = sorted(rates)
    for row in rows:
        it = row['NumIters']
        if not known:
            row['LearningRate'] = float('nan')
            continue
        at = bisect.bisect_right(known, it) - 1
        row['LearningRate'] = rates[known[max(at, 0)]]
    return rows


def parse_log(path_to_log):
    """(train_rows, test_rows): one OrderedDict per logged iteration with
    NumIters, Seconds, LearningRate and the outputs by name."""
    train_rows, test_rows = [], []
    rates = {}
    iteration = -1
    test_net = 0
    train_row = test_row = None
    for line, seconds in _scan(path_to_log):
        match = _TESTING_NET.search(line)
        if match:
            iteration = int(match.group(1))
            test_net = int(match.group(2))
            continue
        match = _LEARNING_RATE.search(line)
        if match:
            rates.setdefault(int(match.group(1)), float(match.group(2)))
            continue
        match = _ITERATION.search(line)
        if match:
            iteration = int(match.group(1))
        if iteration < 0:
            continue
        for regex, rows, is_test in ((_TRAIN_OUTPUT, train_rows, False),
                                     (_TEST_OUTPUT, test_rows, True)):
            match = regex.search(line)
            if not match:
                continue
            row = test_row if is_test else train_row
            if row is None or row['NumIters'] != iteration:
                row = OrderedDict([('NumIters', iteration),
                                   ('Seconds', seconds),
                                   ('LearningRate', float('nan'))])
                rows.append(row)
            name = match.group(2)
            if is_test and test_net > 0:
                name = '%s_net%d' % (name, test_net)
            row[name] = float(match.group(3))
            if is_test:
                test_row = row
            else:
                train_row = row
    return _finish_rows(train_rows, rates), _finish_rows(test_rows, rates)


def parse_display_losses(path_to_log):
    """[(iteration, seconds, loss)] of the training display lines
    ("Iteration N (...), loss = X" in poseidon_train's log, "Iteration N,
    loss = X" in Caffe's): the loss smoothed over average_loss
    iterations."""
    out = []
    for line, seconds in _scan(path_to_log):
        match = _DISPLAY_LOSS.search(line)
        if match:
            out.append((int(match.group(1)), seconds,
                        float(match.group(2))))
    return out


def parse_legacy(path_to_log):
    """The two tables of Caffe's parse_log.sh: train rows (iteration,
    seconds, display loss, learning rate) and test rows (iteration, seconds,
    test output #0, test output #1) of the first test net."""
    train_rows, test_rows = parse_log(path_to_log)
    rates = {row['NumIters']: row['LearningRate'] for row in train_rows}
    rates.update((row['NumIters'], row['LearningRate']) for row in test_rows)
    legacy_train = []
    for it, seconds, loss in parse_display_losses(path_to_log):
        known = sorted(rates)
        at = bisect.bisect_right(known, it) - 1
        rate = rates[known[max(at, 0)]] if known else float('nan')
        legacy_train.append((it, seconds, loss, rate))
    legacy_test = []
    for row in test_rows:
        values = [v for k, v in row.items()
                  if k not in ('NumIters', 'Seconds', 'LearningRate') and
                  not re.search(r'_net\d+$', k)]
        values += [float('nan')] * (2 - len(values))
        legacy_test.append((row['NumIters'], row['Seconds']) +
                           tuple(values[:2]))
    return legacy_train, legacy_test


def _format(value):
    if isinstance(value, float):
        return 'nan' if value != value else '%.10g' % value
    return str(value)


def write_csv(output_filename, dict_list, delimiter=',', verbose=False):
    """Writes rows (OrderedDicts) as CSV with a header; columns are those
    of all rows in order of appearance. Nothing is written for no rows."""
    if not dict_list:
        if verbose:
            print('Not writing %s; no lines to write' % output_filename)
        return
    fields = []
    for row in dict_list:
        fields.extend(k for k in row if k not in fields)
    with open(output_filename, 'w', newline='') as f:
        writer = csv.writer(f, delimiter=delimiter, lineterminator='\n')
        writer.writerow(fields)
        for row in dict_list:
            writer.writerow([_format(row[k]) if k in row else ''
                             for k in fields])
    if verbose:
        print('Wrote %s' % output_filename)


def save_csv_files(logfile_path, output_dir, train_dict_list, test_dict_list,
                   delimiter=',', verbose=False):
    """Writes <output_dir>/<log name>.train and .test."""
    base = os.path.join(output_dir, os.path.basename(logfile_path))
    write_csv(base + '.train', train_dict_list, delimiter, verbose)
    write_csv(base + '.test', test_dict_list, delimiter, verbose)


def save_legacy_files(logfile_path, output_dir):
    """Writes parse_log.sh's <log name>.train and .test tables."""
    legacy_train, legacy_test = parse_legacy(logfile_path)
    base = os.path.join(output_dir, os.path.basename(logfile_path))
    for suffix, header, rows in (
            ('.test', '#Iters Seconds TestAccuracy TestLoss', legacy_test),
            ('.train', '#Iters Seconds TrainingLoss LearningRate',
             legacy_train)):
        table = [header.split()] + [[_format(v) for v in row]
                                    for row in rows]
        widths = [max(len(r[i]) for r in table) for i in range(4)]
        with open(base + suffix, 'w') as f:
            for r in table:
                f.write('  '.join(c.ljust(w) for c, w in zip(r, widths))
                        .rstrip() + '\n')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Parse a poseidon_train or Caffe training log into two '
                    'CSV files containing training and testing information')
    parser.add_argument('logfile_path', help='Path to log file')
    parser.add_argument('output_dir',
                        help='Directory in which to place output CSV files')
    parser.add_argument('--verbose', action='store_true',
                        help='Print some extra info (e.g., output filenames)')
    parser.add_argument('--delimiter', default=',',
                        help="Column delimiter in output files "
                             "(default: '%(default)s')")
    parser.add_argument('--legacy', action='store_true',
                        help="Write parse_log.sh's space-separated tables "
                             "(#Iters Seconds TrainingLoss LearningRate; "
                             "#Iters Seconds TestAccuracy TestLoss) instead")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if not os.path.isfile(args.logfile_path):
        sys.exit('parse_log: no log file %s' % args.logfile_path)
    if not os.path.isdir(args.output_dir):
        sys.exit('parse_log: output directory %s does not exist'
                 % args.output_dir)
    if args.legacy:
        save_legacy_files(args.logfile_path, args.output_dir)
        return
    train_rows, test_rows = parse_log(args.logfile_path)
    if not train_rows and not test_rows:
        sys.exit('parse_log: %s has no "Train net output" or "Test net '
                 'output" lines (is it a training log?)' % args.logfile_path)
    save_csv_files(args.logfile_path, args.output_dir, train_rows, test_rows,
                   delimiter=args.delimiter, verbose=args.verbose)


if __name__ == '__main__':
    main()
