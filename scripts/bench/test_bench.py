"""Tests of the CPU benchmark's pure parts (CTest: bench_scripts).

FLOP counting against a hand computation and published model figures, the
shape rules against Poseidon's own nets (through pycaffe, when the build's
python/ is on PYTHONPATH) and against PyTorch, caffe_net's translation of
all seven benchmark nets against the hand-written PyTorch nets, the
per-layer profile's attribution, the peak GEMM children, peak-RSS
measurement and the command line. Tests that need PyTorch skip with the
reason where it is not installed (the project's scripts do not install it).
No timing figure is asserted.
"""

import importlib.util
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import bench_vs_pytorch  # noqa: E402
import caffe_net  # noqa: E402
import compare_builds  # noqa: E402
import cpu_peak  # noqa: E402
import layer_profile  # noqa: E402
import net_cost  # noqa: E402
import timing_nets  # noqa: E402

SEVEN = list(bench_vs_pytorch.NETS)
HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(
    not HAS_TORCH, reason="PyTorch is not installed (the project's scripts "
    "leave it out; pip install torch to run this test)")

# Input 2x3x8x8 -> conv1 (4 out, 3x3, pad 1) 2x4x8x8 -> relu -> pool 2/2
# 2x4x4x4 -> conv2 (6 out, 3x3, group 2) 2x6x2x2 -> ip (5) -> loss.
SMALL_NET = """
name: "small"
layer { name: "data" type: "Input" top: "data"
  input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }
layer { name: "label" type: "DummyData" top: "label"
  dummy_data_param { shape { dim: 2 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  %s
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
  convolution_param { num_output: 6 kernel_size: 3 group: 2 } }
layer { name: "ip" type: "InnerProduct" bottom: "conv2" top: "ip"
  inner_product_param { num_output: 5 } }
layer { name: "acc" type: "Accuracy" bottom: "ip" bottom: "label"
  top: "acc" include { phase: TEST } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label"
  top: "loss" }
"""
FROZEN = "param { lr_mult: 0 } param { lr_mult: 0 }"


def parse(text):
    return caffe_net._parse(caffe_net._tokens(text), False)


def net_at_batch(name, batch):
    net = caffe_net.read_prototxt(
        timing_nets.path(name))
    for layer in net["layer"]:
        for param in (layer.get("input_param", []) +
                      layer.get("dummy_data_param", [])):
            for shape in param["shape"]:
                shape["dim"][0] = batch
    return net


def test_flops_of_a_small_net_by_hand():
    r = net_cost.analyse(parse(SMALL_NET % ""))
    by_name = {l["name"]: l for l in r["layers"]}
    assert "acc" not in by_name  # TEST phase only
    assert r["shapes"]["conv1"] == (2, 4, 8, 8)
    assert r["shapes"]["pool1"] == (2, 4, 4, 4)
    assert r["shapes"]["conv2"] == (2, 6, 2, 2)
    assert r["shapes"]["ip"] == (2, 5)
    # conv1: 2 images x 4 maps x 8x8 outputs x 3 channels x 3x3 = 13824 MACs.
    assert by_name["conv1"]["forward_flops"] == 2 * 13824
    # Its bottom is the data: only the weight gradient.
    assert by_name["conv1"]["backward_flops"] == 2 * 13824
    # conv2: 2 x 6 x 2x2 x (4 / 2 groups) x 3x3 = 864 MACs; weight and
    # bottom gradients.
    assert by_name["conv2"]["forward_flops"] == 2 * 864
    assert by_name["conv2"]["backward_flops"] == 2 * 2 * 864
    # ip: 2 rows x 5 outputs x 24 inputs = 240 MACs.
    assert by_name["ip"]["forward_flops"] == 2 * 240
    assert by_name["ip"]["backward_flops"] == 2 * 2 * 240
    assert r["forward_flops"] == 2 * (13824 + 864 + 240)
    assert r["backward_flops"] == 2 * (13824 + 2 * 864 + 2 * 240)
    for kind in ("ReLU", "Pooling", "SoftmaxWithLoss"):
        assert all(l["forward_flops"] == 0 for l in r["layers"]
                   if l["type"] == kind)


def test_frozen_first_layer_needs_no_gradient_below_conv2():
    r = net_cost.analyse(parse(SMALL_NET % FROZEN))
    by_name = {l["name"]: l for l in r["layers"]}
    assert by_name["conv1"]["backward_flops"] == 0
    # Nothing learnable below conv2: its bottom gradient is not computed.
    assert by_name["conv2"]["backward_flops"] == 2 * 864
    assert by_name["ip"]["backward_flops"] == 2 * 2 * 240


def test_caffe_pooling_rounds_up_and_clips_the_last_window():
    assert net_cost._pool_out(13, 3, 0, 2) == 6
    assert net_cost._pool_out(14, 3, 0, 2) == 7  # rounds up
    assert net_cost._pool_out(4, 2, 1, 2) == 3
    # ceil((5 + 2 - 2) / 2) + 1 = 4, but window 4 would start in the pad.
    assert net_cost._pool_out(5, 2, 1, 2) == 3


def test_shape_errors_name_the_layer():
    # conv1 with 3 maps feeds conv2's 2 groups.
    odd = SMALL_NET.replace("num_output: 4 kernel_size: 3 pad: 1",
                            "num_output: 3 kernel_size: 3 pad: 1") % ""
    with pytest.raises(net_cost.ShapeError, match="layer conv2 .*group 2"):
        net_cost.analyse(parse(odd))
    missing = SMALL_NET.replace('bottom: "conv2" top: "ip"',
                                'bottom: "nosuch" top: "ip"') % ""
    with pytest.raises(net_cost.ShapeError, match="layer ip .*nosuch"):
        net_cost.analyse(parse(missing))


# Published forward multiply-adds per 224x224 (299 for Inception-V3) image
# of the nets as Caffe defines them: AlexNet with its two groups 0.72 G,
# VGG-16 15.47 G, ResNet-50 (Caffe's, stride on the first 1x1) 3.86 G,
# GoogLeNet 1.5 G plus its two auxiliary heads, Inception-V3 5.7 G plus its
# auxiliary head.
PUBLISHED_GMAC = {"alexnet": (0.72, 0.73), "vgg16": (15.4, 15.5),
                  "resnet50": (3.85, 3.87), "googlenet": (1.5, 1.65),
                  "inception_v3": (5.7, 5.75)}


@pytest.mark.parametrize("name", sorted(PUBLISHED_GMAC))
def test_forward_flops_match_published_figures(name):
    r = net_cost.analyse(net_at_batch(name, 1))
    low, high = PUBLISHED_GMAC[name]
    assert low <= r["forward_flops"] / 2e9 <= high
    # Every weighted layer but the first has both gradients.
    first = next(l for l in r["layers"] if l["type"] == "Convolution")
    assert r["backward_flops"] == \
        2 * r["forward_flops"] - first["forward_flops"]


def test_flops_scale_with_the_batch():
    one = net_cost.analyse(net_at_batch("googlenet", 1))
    eight = net_cost.analyse(net_at_batch("googlenet", 8))
    assert eight["forward_flops"] == 8 * one["forward_flops"]
    assert eight["backward_flops"] == 8 * one["backward_flops"]


@pytest.mark.parametrize("name", ["resnet50", "vgg16", "googlenet",
                                  "inception_v3", "alexnet"])
def test_timing_nets_are_the_reference_models(name):
    """The timing net's layers are models/<net>/train_val.prototxt's TRAIN
    layers after the data layer (the Accuracy layers are TEST-only)."""
    time_net = caffe_net.train_layers(net_at_batch(name, 1))
    ref = caffe_net.train_layers(caffe_net.read_prototxt(
        os.path.join(REPO_ROOT, "models", name, "train_val.prototxt")))
    strip = [l for l in time_net
             if caffe_net.one(l, "type") not in ("Input", "DummyData")]
    ref = [l for l in ref if caffe_net.one(l, "type") != "Data"]
    assert [caffe_net.one(l, "name") for l in strip] == \
        [caffe_net.one(l, "name") for l in ref]
    for a, b in zip(strip, ref):
        for key in ("type", "bottom", "top", "convolution_param",
                    "pooling_param", "inner_product_param", "concat_param",
                    "eltwise_param", "lrn_param", "loss_weight"):
            assert a.get(key) == b.get(key), (caffe_net.one(a, "name"), key)
    kinds = {caffe_net.one(l, "type") for l in strip}
    if name == "googlenet":
        assert {"LRN", "Concat"} <= kinds
        assert sum(caffe_net.one(l, "type") == "SoftmaxWithLoss"
                   for l in strip) == 3
    if name == "inception_v3":
        convs = [l["convolution_param"][0] for l in strip
                 if caffe_net.one(l, "type") == "Convolution"]
        assert any(caffe_net._pair(p, "kernel", 1) == (1, 7) for p in convs)
        assert any(caffe_net._pair(p, "pad", 0) == (3, 0) for p in convs)


@pytest.mark.parametrize("name", SEVEN)
def test_shapes_match_poseidon(name, tmp_path):
    """net_cost's Caffe shape rules against Poseidon's own Net (pycaffe)."""
    try:
        import caffe
    except ImportError:
        pytest.skip("pycaffe not importable (CTest puts the build's python/ "
                    "on PYTHONPATH)")
    path = bench_vs_pytorch.write_net(name, 1, str(tmp_path))
    ours = net_cost.analyse_file(path)["shapes"]
    net = caffe.Net(path, caffe.TRAIN)
    for blob, data in net.blobs.items():
        if blob in ours:
            assert tuple(data.data.shape) == ours[blob], blob
    assert len([b for b in net.blobs if b in ours]) > len(ours) * 0.9


@needs_torch
@pytest.mark.parametrize("name", SEVEN)
def test_translation_runs_at_batch_one_with_caffe_shapes(name):
    import torch

    torch.manual_seed(0)
    net = net_at_batch(name, 1)
    ref = net_cost.analyse(net)
    # TRAIN, as benchmarked; Inception-V3's auxiliary head then normalises
    # one value per channel (BatchNorm2d itself refuses that).
    model = caffe_net.build_torch_net(net).train()
    blobs = {b: (torch.zeros(s, dtype=torch.long) if len(s) == 1
                 else torch.randn(*s))
             for b, s in caffe_net.input_shapes(net).items()}
    with torch.no_grad():
        loss, out = model.forward_blobs(blobs)
    assert torch.isfinite(loss)
    for blob, tensor in out.items():
        assert tuple(tensor.shape) == ref["shapes"][blob], blob
    last_ip = [l for l in ref["layers"] if l["type"] == "InnerProduct"][-1]
    classes = 10 if name in ("lenet", "cifar10_quick") else 1000
    assert last_ip["tops"] == [(1, classes)]
    # Every layer of the file is in some step (BatchNorm + Scale share one).
    covered = {n for names in model.step_layers for n in names}
    wanted = {l["name"] for l in ref["layers"]
              if l["type"] not in ("Input", "DummyData")}
    assert covered == wanted
    # Each Scale after a BatchNorm is folded into BatchNorm2d(affine=True).
    scales = sum(l["type"] == "Scale" for l in ref["layers"])
    assert sum(len(names) == 2 for names in model.step_layers) == scales


@needs_torch
@pytest.mark.parametrize("name", ["lenet", "cifar10_quick", "alexnet"])
def test_translation_equals_the_handwritten_net(name):
    import torch
    import handwritten_nets

    torch.manual_seed(0)
    net = net_at_batch(name, 2)
    translated = caffe_net.build_torch_net(net).eval()
    blobs = {b: (torch.zeros(s, dtype=torch.long) if len(s) == 1
                 else torch.randn(*s))
             for b, s in caffe_net.input_shapes(net).items()}
    with torch.no_grad():
        translated(blobs)  # materialises LazyLinear
    reference = handwritten_nets.build(name).eval()
    ours = list(translated.parameters())
    theirs = list(reference.parameters())
    assert [tuple(p.shape) for p in ours] == [tuple(p.shape) for p in theirs]
    with torch.no_grad():
        for a, b in zip(ours, theirs):
            b.copy_(a)
        _, out = translated.forward_blobs(blobs)
        logits = reference(blobs["data"])
    top = [l for l in net["layer"] if caffe_net.one(l, "type") ==
           "InnerProduct"][-1]["top"][0]
    assert torch.allclose(out[top], logits, rtol=1e-4, atol=1e-5)


PROFILE_NET = """
name: "bn"
layer { name: "data" type: "Input" top: "data"
  input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }
layer { name: "label" type: "DummyData" top: "label"
  dummy_data_param { shape { dim: 2 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
layer { name: "bn1" type: "BatchNorm" bottom: "conv1" top: "conv1" }
layer { name: "scale1" type: "Scale" bottom: "conv1" top: "conv1"
  scale_param { bias_term: true } }
layer { name: "a" type: "Convolution" bottom: "conv1" top: "a"
  convolution_param { num_output: 4 kernel_size: 1 } }
layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "conv1" top: "sum" }
layer { name: "ip" type: "InnerProduct" bottom: "sum" top: "ip"
  inner_product_param { num_output: 3 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label"
  top: "loss" }
"""


def test_merge_folds_batchnorm_scale_and_types_splits(tmp_path):
    analysis = net_cost.analyse(parse(PROFILE_NET))
    path = tmp_path / "p.profile"
    path.write_text("# layer forward_ms backward_ms\n"
                    "data 0 0\nlabel 0 0\nconv1 1 2\nbn1 0.5 0.5\n"
                    "scale1 0.25 0.25\nconv1_scale1_0_split 0.1 0.2\n"
                    "a 1 1\nsum 0.1 0.1\nip 0.2 0.4\nloss 0.1 0\n")
    poseidon = layer_profile.read_poseidon_profile(str(path))
    torch_result = {"steps": [
        {"layers": ["conv1"], "forward_ms": 0.5, "backward_ms": 0.5},
        {"layers": ["bn1", "scale1"], "forward_ms": 1, "backward_ms": 2},
        {"layers": ["a"], "forward_ms": 1, "backward_ms": 1},
        {"layers": ["sum"], "forward_ms": 1, "backward_ms": 1},
        {"layers": ["ip"], "forward_ms": 1, "backward_ms": 1},
        {"layers": ["loss"], "forward_ms": 1, "backward_ms": 1}]}
    rows = layer_profile.merge(analysis, poseidon, torch_result)
    by_label = {r["label"]: r for r in rows}
    assert by_label["bn1+scale1"]["poseidon"] == (0.75, 0.75)
    assert by_label["bn1+scale1"]["pytorch"] == (1, 2)
    assert by_label["bn1+scale1"]["type"] == "BatchNorm+Scale"
    assert by_label["conv1_scale1_0_split"]["type"] == "Split"
    assert by_label["conv1_scale1_0_split"]["pytorch"] is None
    # Forward plus the weight gradient (the data needs none).
    assert by_label["conv1"]["gflop"] == pytest.approx(
        2 * 2 * 2 * 4 * 64 * 27 / 1e9)
    summary = layer_profile.type_summary(rows)
    assert summary["Convolution"]["layers"] == 2
    assert summary["Convolution"]["poseidon"] == [2, 3]
    # conv1 is where Poseidon spends most beyond PyTorch (3 ms against 1).
    lines = layer_profile.format_rows(rows, top=1)
    assert len(lines) == 3 and lines[1].startswith("conv1 ")
    assert len(layer_profile.format_rows(rows)) == len(rows) + 2
    with pytest.raises(ValueError, match="p.bad:1"):
        bad = tmp_path / "p.bad"
        bad.write_text("conv1 1\n")
        layer_profile.read_poseidon_profile(str(bad))


@needs_torch
def test_pytorch_backward_is_charged_to_its_layers():
    import torch

    torch.set_num_threads(1)
    net = parse(PROFILE_NET)
    model = caffe_net.build_torch_net(net).train()
    blobs = {b: (torch.zeros(s, dtype=torch.long) if len(s) == 1
                 else torch.randn(*s))
             for b, s in caffe_net.input_shapes(net).items()}
    step = layer_profile.timed_step(model, blobs)
    step()
    result = layer_profile.torch_layer_times(model, step, 2)
    steps = {s["layers"][0]: s for s in result["steps"]}
    assert set(steps) == {"conv1", "bn1", "a", "sum", "ip", "loss"}
    for name in ("conv1", "bn1", "a", "ip", "loss"):
        assert steps[name]["forward_ms"] > 0, name
        assert steps[name]["backward_ms"] > 0, name
    # The parameters' AccumulateGrad nodes go to their layers, and every
    # other backward node was recorded inside some layer's forward.
    assert result["unattributed_backward_ms"] == 0
    charged = sum(s["backward_ms"] for s in result["steps"])
    assert charged + result["unattributed_backward_ms"] <= \
        result["backward_ms"] * 1.05 + 0.05
    assert not model.record_layers


def test_peak_rss_of_a_child():
    # From a small driver, as the benchmark runs it (this pytest process may
    # be larger than the child: see Note [Peak RSS of a child]).
    driver = (
        "import os, sys; sys.path.insert(0, %r)\n"
        "import bench_vs_pytorch as b\n"
        "code = 'x = bytearray(%%d << 20)'\n"
        "for mib in (150, 300):\n"
        "    _, rss = b.run_child([sys.executable, '-c', code %% mib],\n"
        "                         dict(os.environ), 'child')\n"
        "    print(rss)\n" % HERE)
    out = subprocess.run([sys.executable, "-c", driver],
                         stdout=subprocess.PIPE, universal_newlines=True,
                         check=True).stdout.split()
    small, large = float(out[0]), float(out[1])
    assert 150 <= small < 150 + 60
    assert 300 <= large < 300 + 60
    with pytest.raises(SystemExit, match="exit 3"):
        bench_vs_pytorch.run_child([sys.executable, "-c", "exit(3)"],
                                   dict(os.environ), "child")


def test_gemm_children_report_gflops():
    # (torch.mm's child runs in every benchmark; left out here for time.)
    libraries = ["openblas", "numpy"]
    exe = os.environ.get("POSEIDON_TRAIN")
    blas = cpu_peak.blas_of_executable(exe) if exe else None
    if exe:
        assert blas and "blas" in os.path.basename(blas)
    results, errors = cpu_peak.measure(
        libraries, 128, 1, 1, cpu_peak.thread_env(os.environ, 1), blas)
    assert not errors
    assert [r["library"] for r in results] == libraries
    for r in results:
        assert r["gflops"] > 0 and r["threads"] == 1 and r["what"]


BENCH_GEMM_OUTPUT = """cblas_sgemm from /lib/libopenblas.so.0
Poseidon's kernel: AVX2, 6 x 16 tile, blocks 252 x 256 x 4096 (L2 512 KiB, L3 32768 KiB)
GFLOP/s, median of 3 interleaved repeats; ratio = lib / openblas

== 2 thread(s)
product (M x N x K, op)                                     openblas    onednn      blis  poseidon dnnl/ob blis/ob  own/ob
square 1024 1024x1024x1024 NN                                  254.2     496.6      84.8     455.8    1.95    0.33    1.79
square 2048 2048x2048x2048 NN                                  249.6     485.0      85.9     412.8    1.94    0.34    1.65
"""


def test_bench_gemm_own_column_is_parsed():
    assert cpu_peak.parse_bench_gemm(BENCH_GEMM_OUTPUT, 2048) == (412.8, 2)
    assert cpu_peak.parse_bench_gemm(BENCH_GEMM_OUTPUT, 1024) == (455.8, 2)
    assert cpu_peak.bench_gemm_kernel(BENCH_GEMM_OUTPUT) == "AVX2"
    # Older builds named the column avx512 and printed no kernel line.
    older = BENCH_GEMM_OUTPUT.replace("  poseidon", "    avx512").replace(
        "Poseidon's kernel: AVX2", "")
    assert cpu_peak.parse_bench_gemm(older, 2048) == (412.8, 2)
    assert cpu_peak.bench_gemm_kernel(older) == "AVX-512"
    with pytest.raises(RuntimeError, match="no figure of Poseidon's kernel"):
        cpu_peak.parse_bench_gemm(BENCH_GEMM_OUTPUT, 512)
    without = BENCH_GEMM_OUTPUT.replace(" poseidon", "").replace(
        "GFLOP/s,", "Poseidon's kernels: not on this CPU\nGFLOP/s,")
    with pytest.raises(RuntimeError, match="do not run on this CPU"):
        cpu_peak.parse_bench_gemm(without, 2048)
    # What bench_gemm prints on a CPU without the kernels: the column is
    # there, filled with zeros (a figure of 0 would divide by zero).
    zeros = BENCH_GEMM_OUTPUT.replace("455.8", "0.0").replace(
        "412.8", "0.0").replace("GFLOP/s,", "Poseidon's kernels: not on this "
                                "CPU (neither AVX-512 nor AVX2, or "
                                "POSEIDON_KERNELS=blas)\nGFLOP/s,")
    with pytest.raises(RuntimeError, match="do not run on this CPU"):
        cpu_peak.parse_bench_gemm(zeros, 2048)


def test_poseidon_gemm_peak_runs_bench_gemm():
    exe = os.environ.get("POSEIDON_TRAIN")
    bench_gemm = cpu_peak.bench_gemm_of_executable(exe)
    if not bench_gemm:
        pytest.skip("no bench_gemm beside POSEIDON_TRAIN")
    results, errors = cpu_peak.measure(
        ["poseidon"], 512, 1, 1, cpu_peak.thread_env(os.environ, 1), None,
        bench_gemm)
    if errors and "do not run on this CPU" in errors[0]:
        pytest.skip(errors[0])
    assert not errors, errors
    assert results[0]["gflops"] > 0 and results[0]["threads"] == 1


def run_script(*args):
    return subprocess.run(
        [sys.executable, os.path.join(HERE, "bench_vs_pytorch.py")] +
        list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        universal_newlines=True)


def test_dry_run_lists_all_seven_nets_at_each_thread_count():
    proc = run_script("--dry-run", "--threads", "1,2", "--batch",
                      "vgg16=2", "--build", "/nonexistent")
    assert proc.returncode == 0, proc.stdout
    for name in SEVEN:
        assert "\n%s batch " % name in proc.stdout
    assert "vgg16 batch 2," in proc.stdout
    assert proc.stdout.count("  2 threads:") == 7


def test_dry_run_with_a_base_build_runs_both_builds():
    proc = run_script("--dry-run", "--threads", "2", "--nets",
                      "cifar10_quick", "--build", "/after",
                      "--base-build", "/before")
    assert proc.returncode == 0, proc.stdout
    assert "/after/tools/poseidon_train time --model=" in proc.stdout
    assert "/before/tools/poseidon_train time --model=" in proc.stdout


def test_base_build_medians_and_ratios():
    entry = {"poseidon_runs": [{"total_ms": t, "forward_ms": 1,
                                "backward_ms": 1, "peak_rss_mib": 9}
                               for t in (100, 90, 300)],
             "pytorch_runs": [{"total_ms": t, "forward_ms": 1,
                               "backward_ms": 1, "peak_rss_mib": 9}
                              for t in (150, 180, 160)],
             "base_runs": [{"total_ms": t, "forward_ms": 1,
                            "backward_ms": 1, "peak_rss_mib": 9}
                           for t in (120, 500, 110)]}
    bench_vs_pytorch.summarise(entry, 1e9, None)
    assert entry["poseidon_ms"] == 100 and entry["base_ms"] == 120
    assert entry["ratio"] == pytest.approx(1.6)
    assert entry["base_ratio"] == pytest.approx(160 / 120)
    assert entry["base_over_poseidon"] == pytest.approx(1.2)
    # Runs paired in order: 1.2, 500 / 90, 110 / 300.
    assert entry["paired_base_over_poseidon"] == pytest.approx(1.2)


@pytest.mark.parametrize("args,message", [
    (["--base-build", "/b", "--skip-poseidon"], "compares two builds"),
    (["--threads", "0"], "--threads"),
    (["--batch", "vgg=4"], "unknown net 'vgg'"),
    (["--batch", "resnet50=x"], "not NET=BATCH"),
    (["--nets", "lenet,nosuch"], "unknown net 'nosuch'"),
    (["--skip-poseidon", "--skip-pytorch"], "nothing to time"),
])
def test_command_line_errors(args, message):
    proc = run_script("--dry-run", *args)
    assert proc.returncode != 0
    assert message in proc.stdout


def test_missing_torch_says_how_to_get_it(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda n, *a: None if n == "torch" else real(n, *a))
    monkeypatch.setattr(sys, "argv", ["bench_vs_pytorch.py", "--nets",
                                      "lenet", "--skip-poseidon"])
    with pytest.raises(SystemExit) as exit_info:
        bench_vs_pytorch.main()
    assert "pip install torch" in str(exit_info.value)
    assert "--skip-pytorch" in str(exit_info.value)


def test_compare_builds_reads_each_layer_and_the_total():
    output = (
        "I20261203 19:10:59.96 318 test_time.cpp:133]        mvn\tforward: "
        "6.74103 ms.\n"
        "I20261203 19:10:59.96 318 test_time.cpp:135]        mvn\tbackward: "
        "6.5875 ms.\n"
        "I20261203 19:10:59.96 318 test_time.cpp:133] softmax_1000\tforward: "
        "0.678101 ms.\n"
        "I20261203 19:10:59.96 318 test_time.cpp:135] softmax_1000\tbackward: "
        "2e-1 ms.\n"
        "I20261203 19:10:59.96 318 test_time.cpp:154] Average "
        "Forward-Backward: 54.7264 ms.\n")
    order, times, total = compare_builds.parse_layers(output)
    assert order == ["mvn", "softmax_1000"]
    assert times[("mvn", "backward")] == pytest.approx(6.5875)
    assert times[("softmax_1000", "backward")] == pytest.approx(0.2)
    assert total == pytest.approx(54.7264)
    runs = [{"a": 3.0}, {"a": 1.0, "b": 4.0}, {"a": 2.0}]
    assert compare_builds.medians(runs) == {"a": 2.0, "b": 4.0}
    assert compare_builds.ratio(3.0, 2.0) == pytest.approx(1.5)
    assert compare_builds.ratio(None, 2.0) is None


def test_compare_builds_without_total_says_so():
    with pytest.raises(SystemExit) as exit_info:
        compare_builds.parse_layers("no timing here\n")
    assert "Average Forward-Backward" in str(exit_info.value)


def test_compare_builds_conv_writes_one_convolution():
    net = parse(compare_builds.conv_net("8x768x17x17:192,k1x7,p0x3,g2"))
    assert net["force_backward"] == [True]
    data, conv = net["layer"]
    assert data["input_param"][0]["shape"][0]["dim"] == [8, 768, 17, 17]
    param = conv["convolution_param"][0]
    assert [param[k][0] for k in ("num_output", "kernel_h", "kernel_w",
                                  "pad_h", "pad_w", "stride", "group")] == [
        192, 1, 7, 0, 3, 1, 2]
    # Defaults: pad 0, stride 1, group 1; a square kernel.
    param = parse(compare_builds.conv_net("1x3x8x8:4,k3"))["layer"][1][
        "convolution_param"][0]
    assert [param[k][0] for k in ("kernel_h", "kernel_w", "pad_h", "stride",
                                  "group")] == [3, 3, 0, 1, 1]


@pytest.mark.parametrize("spec,words", [
    ("8x3x4:2,k3", "NxCxHxW:OUTPUTS"),
    ("8x3x4x4:2", "no kernel"),
    ("8x3x4x4:2,k3,g2", "group must divide"),
    ("8x3x4x4:2,k3x", "bad kernel"),
])
def test_compare_builds_conv_refuses_bad_specs(spec, words):
    with pytest.raises(ValueError) as error:
        compare_builds.conv_net(spec)
    assert words in str(error.value)


def test_emulated_cluster_variants_set_environment_words():
    import bench_emulated_cluster
    variants = bench_emulated_cluster.parse_variants(
        "per exchange=POSEIDON_PS_WINDOWS=exchange --server_lanes=2;shared=")
    assert variants == [
        ("per exchange", ["POSEIDON_PS_WINDOWS=exchange", "--server_lanes=2"]),
        ("shared", [])]
    flags, env = bench_emulated_cluster.split_env(variants[0][1])
    assert flags == ["--server_lanes=2"]
    assert env == ["POSEIDON_PS_WINDOWS=exchange"]


def test_emulated_cluster_exchange_spans_measure_link_use():
    import bench_emulated_cluster
    # Capacity 1000 bytes/s, samples every 0.1 s: 100 bytes a full interval.
    deltas = ([(0, 0)] * 3 + [(80, 60)] * 10 + [(5, 0)] * 4 +
              [(100, 100)] * 5 + [(0, 0)] * 12 + [(90, 90)] * 3 +
              [(0, 0)] * 12 + [(50, 50)] * 8 + [(0, 0)] * 2)
    samples, rx, tx = [(0.0, 0, 0)], 0, 0
    for i, (d_rx, d_tx) in enumerate(deltas, start=1):
        rx, tx = rx + d_rx, tx + d_tx
        samples.append((i * 0.1, rx, tx))
    spans = bench_emulated_cluster.exchange_spans(samples, 1000.0)
    # The 0.4 s quiet stretch inside joins the first two busy runs (and
    # counts); the 0.3 s burst is too short; the last run ends the samples.
    assert len(spans) == 2
    seconds, span_rx, span_tx, busy = spans[0][:4]
    assert seconds == pytest.approx(1.9)
    assert (span_rx, span_tx) == (1320, 1100)
    assert busy == pytest.approx(1320 / 1900)
    assert spans[1][:3] == (pytest.approx(0.8), 400, 400)
    # Full (85 of the 100 bytes or more): both ways in the 5 intervals of
    # (100, 100), one way in none ((80, 60) is below in both).
    assert spans[0].full_both == pytest.approx(0.5 / 1.9)
    assert spans[0].full_one == 0
    assert (spans[1].full_both, spans[1].full_one) == (0, 0)


def test_emulated_cluster_exchange_spans_tell_one_way_from_both():
    import bench_emulated_cluster
    # A link that runs full one way at a time: in, then out, then both.
    deltas = [(95, 20)] * 6 + [(20, 95)] * 3 + [(90, 90)] * 1
    samples, rx, tx = [(0.0, 0, 0)], 0, 0
    for i, (d_rx, d_tx) in enumerate(deltas, start=1):
        rx, tx = rx + d_rx, tx + d_tx
        samples.append((i * 0.1, rx, tx))
    (span,) = bench_emulated_cluster.exchange_spans(samples, 1000.0)
    assert span.busy == pytest.approx((6 * 95 + 3 * 20 + 90) / 1000.0)
    assert span.full_one == pytest.approx(0.9)
    assert span.full_both == pytest.approx(0.1)


def test_alltoall_probe_moves_what_it_says():
    # The MPI probe beside poseidon_train in the build (CMake's tools/);
    # --alltoall of bench_emulated_cluster runs it on the emulated links.
    exe = os.environ.get("POSEIDON_TRAIN")
    probe = exe and os.path.join(os.path.dirname(exe), "bench_alltoall")
    if not probe or not os.access(probe, os.X_OK):
        pytest.skip("no bench_alltoall beside POSEIDON_TRAIN (a build "
                    "without MPI, or the script run outside CTest)")
    mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np"]
    r = subprocess.run(mpirun + ["3", probe, "--rounds=4", "--depth=2",
                                 "--message", "1000000"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    # 4 rounds of 1 MB to each of 2 peers: 8 MB each way per rank.
    assert ("alltoall: 3 ranks, 4 rounds of 1000000 bytes, depth 2: "
            in r.stdout), r.stdout
    assert r.stdout.rstrip().endswith("s, 8 MB each way per rank"), r.stdout
    bad = subprocess.run([probe, "--depth=0"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2
    assert "--depth needs a positive integer, got '0'" in bad.stderr
