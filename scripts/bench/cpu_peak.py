"""A CPU peak measured on the machine itself: single-precision GEMM GFLOP/s.

bench_vs_pytorch.py divides each side's GFLOP/s by the best of these, at the
same thread count, so "fraction of peak" means "of the fastest large SGEMM
this machine ran with T threads", not of a datasheet figure. Each GEMM runs
in a fresh child (gemm_worker) with the thread count set in its environment
and through the library's own call:

  torch   torch.mm on float32, PyTorch's GEMM (MKL in the x86 pip wheels;
          torch.__config__ names it)
  openblas  cblas_sgemm through ctypes from the OpenBLAS that
          poseidon_train links (found with ldd): Poseidon's GEMM on CPUs
          without AVX-512 and for double, called with
          openblas_set_num_threads(T); its kernels follow OPENBLAS_CORETYPE
          when that is set
  numpy   numpy.matmul on float32, numpy's BLAS (pip wheels bundle their own
          OpenBLAS build; numpy.show_config names it)
  poseidon  Poseidon's own float GEMM (util/sgemm_avx512.hpp on AVX-512
          CPUs, util/sgemm_avx2.hpp on AVX2 CPUs: what its layers call),
          through the bench_gemm program built beside poseidon_train
          (scripts/bench/bench_gemm.cpp: T threads split the columns); only
          for n of 512, 1024 or 2048, the square products bench_gemm runs,
          and only on CPUs with AVX-512 or AVX2

The square n x n products (n = 2048 by default: 17.2 GFLOP each) run once
untimed, then `repeats` times timed; the best time gives 2 n^3 / t
(bench_gemm reports the median of its repeats instead).
"""

import ctypes
import ctypes.util
import json
import os
import re
import subprocess
import sys
import time

LIBRARIES = ("torch", "openblas", "numpy", "poseidon")


def blas_of_executable(path):
    """The BLAS shared library an executable links, from ldd (or None)."""
    try:
        out = subprocess.run(["ldd", path], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL,
                             universal_newlines=True).stdout
    except OSError:
        return None
    found = None
    for line in out.splitlines():
        m = re.match(r"\s*(\S+)\s*=>\s*(\S+)", line)
        if not m:
            continue
        if "openblas" in m.group(1):
            return m.group(2)
        if m.group(1).startswith("libblas.so") and found is None:
            found = m.group(2)
    return found


def _best_seconds(fn, repeats):
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _torch_gemm(n, threads, repeats):
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    c = torch.empty(n, n)
    seconds = _best_seconds(lambda: torch.mm(a, b, out=c), repeats)
    config = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", config)
    mkl = re.search(r"Math Kernel Library Version ([\d.]+)", config)
    what = "PyTorch %s torch.mm (%s%s)" % (
        torch.__version__, blas.group(1) if blas else "BLAS unknown",
        " " + mkl.group(1) if mkl and blas and blas.group(1) == "mkl" else "")
    return seconds, what, torch.get_num_threads()


def _openblas_gemm(n, threads, repeats, path):
    import numpy as np

    if not path:
        path = ctypes.util.find_library("openblas")
    if not path:
        raise RuntimeError("no OpenBLAS library found (no poseidon_train "
                           "to run ldd on, none on the library path)")
    lib = ctypes.CDLL(path)
    what = "OpenBLAS"
    if hasattr(lib, "openblas_get_config"):
        lib.openblas_get_config.restype = ctypes.c_char_p
        what = " ".join(lib.openblas_get_config().decode().split()[:2])
    if hasattr(lib, "openblas_get_corename"):
        lib.openblas_get_corename.restype = ctypes.c_char_p
        what += " (%s kernels)" % lib.openblas_get_corename().decode()
    what += " cblas_sgemm"
    if hasattr(lib, "openblas_set_num_threads"):
        lib.openblas_set_num_threads(threads)
    used = threads
    if hasattr(lib, "openblas_get_num_threads"):
        used = lib.openblas_get_num_threads()
    a = np.random.standard_normal((n, n)).astype(np.float32)
    b = np.random.standard_normal((n, n)).astype(np.float32)
    c = np.empty((n, n), np.float32)
    sgemm = lib.cblas_sgemm
    ptr = ctypes.c_void_p
    sgemm.argtypes = [ctypes.c_int] * 6 + [
        ctypes.c_float, ptr, ctypes.c_int, ptr, ctypes.c_int,
        ctypes.c_float, ptr, ctypes.c_int]
    sgemm.restype = None
    row_major, no_trans = 101, 111
    args = (row_major, no_trans, no_trans, n, n, n, 1.0,
            a.ctypes.data, n, b.ctypes.data, n, 0.0, c.ctypes.data, n)
    seconds = _best_seconds(lambda: sgemm(*args), repeats)
    if not np.allclose(c[:4, :4], a[:4] @ b[:, :4], rtol=1e-3, atol=1e-2):
        raise RuntimeError("cblas_sgemm from %s gave a wrong product" % path)
    return seconds, what, used, path


def _numpy_gemm(n, threads, repeats):
    import numpy as np

    a = np.random.standard_normal((n, n)).astype(np.float32)
    b = np.random.standard_normal((n, n)).astype(np.float32)
    c = np.empty((n, n), np.float32)
    seconds = _best_seconds(lambda: np.matmul(a, b, out=c), repeats)
    what = "numpy %s matmul" % np.__version__
    try:
        deps = np.__config__.CONFIG["Build Dependencies"]["blas"]
        what += " (%s %s)" % (deps.get("name"), deps.get("version"))
    except (AttributeError, KeyError, TypeError):
        pass
    return seconds, what, threads


def bench_gemm_of_executable(path):
    """The bench_gemm program built beside an executable (or None)."""
    if not path:
        return None
    candidate = os.path.join(os.path.dirname(os.path.abspath(path)),
                             "bench_gemm")
    return candidate if os.access(candidate, os.X_OK) else None


def parse_bench_gemm(text, n):
    """(GFLOP/s of Poseidon's column, "poseidon" or in older builds
    "avx512", for the square n product, thread count) from bench_gemm's
    output; raises RuntimeError if absent."""
    # On a CPU without its kernels bench_gemm says so and fills the column
    # with zeros.
    if "not on this CPU" in text:
        raise RuntimeError("Poseidon's own GEMM kernels do not run on this "
                           "CPU")
    columns, threads = None, None
    for line in text.splitlines():
        m = re.match(r"== (\d+) thread", line)
        if m:
            threads = int(m.group(1))
            continue
        if line.startswith("product "):
            columns = line.split()[len("product (M x N x K, op)".split()):]
            continue
        prefix = "square %d %dx%dx%d NN" % (n, n, n, n)
        if columns and line.startswith(prefix):
            values = line[len(prefix):].split()
            name = next((c for c in ("poseidon", "avx512") if c in columns),
                        None)
            if name is None:
                break
            return float(values[columns.index(name)]), threads
    raise RuntimeError("bench_gemm printed no figure of Poseidon's kernel "
                       "for the square %d product" % n)


def bench_gemm_kernel(text):
    """Which of Poseidon's kernels bench_gemm ran: "AVX-512" or "AVX2"."""
    m = re.search(r"Poseidon's kernel: (AVX-512|AVX2)", text)
    return m.group(1) if m else "AVX-512"


def _poseidon_gemm(n, threads, repeats, bench_gemm):
    if not bench_gemm:
        raise RuntimeError("no bench_gemm beside poseidon_train (built with "
                           "BLIS and oneDNN present)")
    if n not in (512, 1024, 2048):
        raise RuntimeError("bench_gemm runs square products of 512, 1024 "
                           "and 2048 only, not %d" % n)
    proc = subprocess.run(
        [bench_gemm, "--reps=%d" % max(repeats, 1), "--threads=%d" % threads,
         "--filter=square %d" % n],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        universal_newlines=True)
    if proc.returncode != 0:
        raise RuntimeError("bench_gemm failed: " +
                           (proc.stdout.strip().splitlines() or ["?"])[-1])
    gflops, used = parse_bench_gemm(proc.stdout, n)
    what = "Poseidon's %s sgemm (bench_gemm)" % bench_gemm_kernel(proc.stdout)
    return 2.0 * n ** 3 / (gflops * 1e9), what, used or threads


def gemm_worker(spec):
    """Child process body: one library's best SGEMM; prints a RESULT line."""
    n, threads, repeats = spec["n"], spec["threads"], spec["repeats"]
    library = spec["library"]
    path = None
    if library == "torch":
        seconds, what, used = _torch_gemm(n, threads, repeats)
    elif library == "openblas":
        seconds, what, used, path = _openblas_gemm(n, threads, repeats,
                                                   spec.get("path"))
    elif library == "numpy":
        seconds, what, used = _numpy_gemm(n, threads, repeats)
    elif library == "poseidon":
        seconds, what, used = _poseidon_gemm(n, threads, repeats,
                                             spec.get("bench_gemm"))
    else:
        raise SystemExit("unknown GEMM library " + library)
    print("RESULT " + json.dumps({
        "library": library, "what": what, "path": path, "threads": used,
        "n": n,
        "seconds": seconds, "gflops": 2.0 * n ** 3 / seconds / 1e9}))


def measure(libraries, n, threads, repeats, env, openblas_path=None,
            bench_gemm=None):
    """Runs one gemm_worker child per library; returns (results, errors)."""
    results, errors = [], []
    for library in libraries:
        spec = {"library": library, "n": n, "threads": threads,
                "repeats": repeats, "path": openblas_path,
                "bench_gemm": bench_gemm}
        proc = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--gemm-worker",
             json.dumps(spec)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            universal_newlines=True)
        lines = [l for l in proc.stdout.splitlines()
                 if l.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            tail = proc.stdout.strip().splitlines()[-1:] or ["(no output)"]
            errors.append("%s: %s" % (library, tail[0]))
            continue
        results.append(json.loads(lines[-1][len("RESULT "):]))
    return results, errors


def thread_env(env, threads):
    """A copy of `env` with every thread-count variable set to `threads`."""
    env = dict(env)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "POSEIDON_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    return env


if __name__ == "__main__":
    # Standalone: python3 cpu_peak.py [THREADS [EXECUTABLE]] prints each
    # library's figure (OpenBLAS: the one EXECUTABLE links, if given).
    if len(sys.argv) > 2 and sys.argv[1] == "--gemm-worker":
        gemm_worker(json.loads(sys.argv[2]))
        sys.exit(0)
    t = int(sys.argv[1]) if len(sys.argv) > 1 else os.cpu_count()
    exe = sys.argv[2] if len(sys.argv) > 2 else None
    res, errs = measure(LIBRARIES, 2048, t, 3, thread_env(os.environ, t),
                        blas_of_executable(exe) if exe else None,
                        bench_gemm_of_executable(exe))
    for r in res:
        print("%8.1f GFLOP/s  %d threads  %s" % (r["gflops"], r["threads"],
                                                  r["what"]))
    for e in errs:
        print("not measured: " + e)
