#!/usr/bin/env python3
"""Plots training curves from poseidon_train (or Caffe) logs into a PNG,
with the arguments of Caffe's tools/extra/plot_training_log.py.example:

    plot_training_log.py CHART_TYPE /where/to/save.png /path/to/first.log ...

One line per log, labelled with the log's file name. Chart types 0-7 are
Caffe's (a value against iterations or seconds); 8 and 9 draw the training
loss and the test accuracy together (two y axes), as the demo does:

    0: Test accuracy  vs. Iters         5: Train learning rate  vs. Seconds
    1: Test accuracy  vs. Seconds       6: Train loss  vs. Iters
    2: Test loss  vs. Iters             7: Train loss  vs. Seconds
    3: Test loss  vs. Seconds           8: Train loss and test accuracy
    4: Train learning rate  vs. Iters      vs. Iters
                                        9: ... vs. Seconds

"Train loss" is the loss the training display prints (smoothed over
average_loss iterations), "Test accuracy" and "Test loss" the first test
net's outputs named accuracy and loss (else its outputs #0 and #1), as in
Caffe's tool. Logs are read with parse_log.py (beside this script); unlike
Caffe's example, a log need not end in ".log", and the figure is only saved
(no window). Needs matplotlib.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parse_log  # noqa: E402  (the module beside this script)

X_AXIS_FIELDS = ['Iters', 'Seconds']
_SEPARATOR = '  vs. '
_VALUE_FIELDS = ['Test accuracy', 'Test loss', 'Train learning rate',
                 'Train loss']
_COMBINED = 'Train loss and test accuracy'


def get_supported_chart_types():
    """Chart descriptions, indexed by chart type."""
    types = ['%s%s%s' % (y, _SEPARATOR, x) for y in _VALUE_FIELDS
             for x in X_AXIS_FIELDS]
    types += ['%s%s%s' % (_COMBINED, _SEPARATOR, x) for x in X_AXIS_FIELDS]
    return types


def get_field_descriptions(chart_type):
    """(x axis field, y axis field) of a chart type."""
    y_field, x_field = get_supported_chart_types()[chart_type].split(
        _SEPARATOR)
    return x_field, y_field


def get_data_label(path_to_log):
    """The legend label of a log: its file name without ".log"."""
    name = os.path.basename(path_to_log)
    return name[:-len('.log')] if name.endswith('.log') else name


def _test_column(rows, kind):
    """The column of the first test net holding `kind` ('accuracy' or
    'loss'): the output of that name, one containing it, else output #0
    (accuracy) or #1 (loss) as Caffe's parse_log.sh takes them."""
    if not rows:
        return None
    outputs = [k for k in rows[0] if k not in
               ('NumIters', 'Seconds', 'LearningRate') and '_net' not in k]
    for name in outputs:
        if name == kind:
            return name
    for name in outputs:
        if kind in name.lower():
            return name
    index = 0 if kind == 'accuracy' else 1
    return outputs[index] if len(outputs) > index else None


def load_series(path_to_log, x_field, y_field):
    """(xs, ys) of one log for a chart's fields; ValueError naming the log
    when it has no such values."""
    x_key = 0 if x_field == 'Iters' else 1
    if y_field == 'Train loss':
        points = [(p[x_key], p[2])
                  for p in parse_log.parse_display_losses(path_to_log)]
    else:
        train_rows, test_rows = parse_log.parse_log(path_to_log)
        x_name = 'NumIters' if x_field == 'Iters' else 'Seconds'
        if y_field == 'Train learning rate':
            rows, column = train_rows, 'LearningRate'
        else:
            kind = 'accuracy' if y_field == 'Test accuracy' else 'loss'
            rows, column = test_rows, _test_column(test_rows, kind)
        points = [(r[x_name], r[column]) for r in rows
                  if column is not None and column in r]
    if not points:
        raise ValueError('%s has no %s values (no matching lines in the '
                         'log)' % (path_to_log, y_field.lower()))
    return [p[0] for p in points], [p[1] for p in points]


def plot_chart(chart_type, path_to_png, path_to_log_list):
    """Draws the chart for every log and saves it to path_to_png."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    x_field, y_field = get_field_descriptions(chart_type)
    x_label = 'Iterations' if x_field == 'Iters' else 'Seconds'
    colors = plt.rcParams['axes.prop_cycle'].by_key()['color']
    fig, ax = plt.subplots(figsize=(8, 5))
    title = get_supported_chart_types()[chart_type]
    if y_field == _COMBINED:
        # One log: a colour per quantity (and per axis); several: a colour
        # per log, the line style telling loss (solid) from accuracy.
        single = len(path_to_log_list) == 1
        ax_acc = ax.twinx()
        for i, log in enumerate(path_to_log_list):
            label = get_data_label(log)
            loss_color = colors[0 if single else i % len(colors)]
            acc_color = colors[1 if single else i % len(colors)]
            prefix = '' if single else label + ': '
            xs, ys = load_series(log, x_field, 'Train loss')
            ax.plot(xs, ys, color=loss_color, linewidth=1.0,
                    label=prefix + 'train loss')
            xs, ys = load_series(log, x_field, 'Test accuracy')
            ax_acc.plot(xs, ys, color=acc_color, linestyle='--', marker='o',
                        markersize=3, linewidth=1.2,
                        label=prefix + 'test accuracy')
        if single:
            ax.set_ylabel('Train loss', color=colors[0])
            ax_acc.set_ylabel('Test accuracy', color=colors[1])
        else:
            ax.set_ylabel('Train loss')
            ax_acc.set_ylabel('Test accuracy')
        lines = ax.get_lines() + ax_acc.get_lines()
        ax.legend(lines, [l.get_label() for l in lines], loc='center right')
        title = '%s vs. %s' % (_COMBINED, x_label.lower())
        if single:
            title = '%s: %s' % (get_data_label(path_to_log_list[0]), title)
    else:
        for i, log in enumerate(path_to_log_list):
            xs, ys = load_series(log, x_field, y_field)
            ax.plot(xs, ys, color=colors[i % len(colors)], linewidth=1.0,
                    marker='o' if len(xs) <= 50 else None, markersize=3,
                    label=get_data_label(log))
        ax.set_ylabel(y_field)
        loc = 'upper right' if ('loss' in y_field or 'rate' in y_field) \
            else 'lower right'
        ax.legend(loc=loc)
    ax.set_xlabel(x_label)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path_to_png, dpi=100)
    plt.close(fig)


def print_help(out=sys.stderr):
    out.write('Usage:\n    %s chart_type[0-%d] /where/to/save.png '
              '/path/to/first.log ...\nSupported chart types:\n'
              % (os.path.basename(sys.argv[0]),
                 len(get_supported_chart_types()) - 1))
    for i, description in enumerate(get_supported_chart_types()):
        out.write('    %d: %s\n' % (i, description))


def main(argv):
    if len(argv) < 4:
        print_help()
        return 1
    try:
        chart_type = int(argv[1])
    except ValueError:
        chart_type = -1
    if not 0 <= chart_type < len(get_supported_chart_types()):
        sys.stderr.write('%s is not a valid chart type.\n' % argv[1])
        print_help()
        return 1
    path_to_png = argv[2]
    if not path_to_png.endswith('.png'):
        sys.stderr.write('Path must end with .png: %s\n' % path_to_png)
        return 1
    logs = argv[3:]
    for log in logs:
        if not os.path.isfile(log):
            sys.stderr.write('Path does not exist: %s\n' % log)
            return 1
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.stderr.write('plot_training_log: matplotlib is not installed '
                         '(bash scripts/install_python_deps.sh, or pip '
                         'install matplotlib)\n')
        return 1
    try:
        plot_chart(chart_type, path_to_png, logs)
    except ValueError as e:
        sys.stderr.write('plot_training_log: %s\n' % e)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
