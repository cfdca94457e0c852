"""Console scripts of the Python wheel: poseidon_train, psd_run and the data
tools on PATH after `pip install`.

The wheel carries the compiled tools in caffe/bin/ (beside libposeidon.so in
caffe/, which their RPATH finds) and the launcher as caffe/_psd_run.py; each
console script runs the one it is named after with the same arguments,
exit status and signals (the tool replaces this process).
"""
import os
import sys
import sysconfig

_HERE = os.path.dirname(os.path.abspath(__file__))


def _exec_tool(name):
    path = os.path.join(_HERE, 'bin', name)
    if not os.access(path, os.X_OK):
        sys.stderr.write(
            'Error: %s is not in this installation of Poseidon (looked for '
            '%s); reinstall the wheel, or use a build tree\'s tools/%s\n' %
            (name, path, name))
        return 127
    env = dict(os.environ)
    # poseidon_train embeds the Python it was built with (Python layers); a
    # Python that is not on the loader's path (pyenv, a venv of one) must be
    # found there.
    libdir = sysconfig.get_config_var('LIBDIR')
    if libdir and os.path.isdir(libdir):
        paths = [p for p in env.get('LD_LIBRARY_PATH', '').split(':') if p]
        if libdir not in paths:
            env['LD_LIBRARY_PATH'] = ':'.join([libdir] + paths)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(path, [name] + sys.argv[1:], env)


def poseidon_train():
    return _exec_tool('poseidon_train')


def convert_imageset():
    return _exec_tool('convert_imageset')


def convert_mnist_data():
    return _exec_tool('convert_mnist_data')


def convert_cifar_data():
    return _exec_tool('convert_cifar_data')


def compute_image_mean():
    return _exec_tool('compute_image_mean')


def partition_data():
    return _exec_tool('partition_data')


def upgrade_net_proto_text():
    return _exec_tool('upgrade_net_proto_text')


def upgrade_net_proto_binary():
    return _exec_tool('upgrade_net_proto_binary')


def psd_run():
    """The cluster launcher (scripts/psd_run in the sources)."""
    import importlib.util
    path = os.path.join(_HERE, '_psd_run.py')
    spec = importlib.util.spec_from_file_location('caffe._psd_run', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main(sys.argv[1:])
