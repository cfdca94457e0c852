// fuzz_seeds OUT_DIR: writes the seed corpora of the fuzz harnesses, one
// folder per harness under OUT_DIR, made from the repository's own files
// (its prototxts and nets) and from Fashion-MNIST (Debian's
// dataset-fashion-mnist; synthetic images stand in when it is absent), the
// distributed layer's messages from its own encoders (fuzz_dist.cpp), and
// the layer set-up nets (fuzz_layers.cpp).
// scripts/fuzz/run_fuzzers.sh runs it before fuzzing.
#include <google/protobuf/text_format.h>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "fuzz_dist.hpp"
#include "fuzz_input.hpp"
#include "fuzz_layers.hpp"
#include "poseidon/util/image_codecs.hpp"
#include "poseidon/net.hpp"
#include "poseidon/util/alloc_guard.hpp"
#include "poseidon/util/db.hpp"
#include "poseidon/util/hdf5.hpp"
#include "poseidon/util/image_io.hpp"
#include "poseidon/util/io.hpp"
#include "poseidon/util/mnist.hpp"
#include "poseidon/util/upgrade_proto.hpp"

namespace poseidon {
namespace fuzz {
namespace {

namespace fs = std::filesystem;

class Corpus {
 public:
  Corpus(const fs::path& root, const std::string& name) : dir_(root / name) {
    fs::create_directories(dir_);
  }
  void Add(const std::string& name, const std::string& bytes) {
    std::ofstream out(dir_ / name, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    CHECK(out.good()) << "cannot write " << (dir_ / name);
    ++count_;
  }
  ~Corpus() {
    std::printf("fuzz_seeds: %-16s %3d seeds in %s\n",
                dir_.filename().c_str(), count_, dir_.c_str());
  }

 private:
  fs::path dir_;
  int count_ = 0;
};

std::string Serialize(const google::protobuf::Message& m) {
  std::string bytes;
  CHECK(m.SerializeToString(&bytes));
  return bytes;
}

vector<fs::path> RepoPrototxts() {
  vector<fs::path> files;
  for (const char* dir : {"models", "examples"}) {
    for (const auto& e : fs::recursive_directory_iterator(SourcePath(dir))) {
      if (e.path().extension() == ".prototxt") files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string SeedName(const fs::path& path) {
  std::string name = fs::relative(path, SourcePath("")).string();
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  return name;
}

// A V0 net (Caffe before 2014): LeNet's layers with its weights.
NetParameter V0LeNet(const NetParameter& weights) {
  NetParameter net;
  net.set_name("LeNet_v0");
  net.add_input("data");
  for (int d : {1, 1, 28, 28}) net.add_input_dim(d);
  struct Spec {
    const char* name;
    const char* type;
    const char* bottom;
  };
  const Spec specs[] = {{"conv1", "conv", "data"},  {"pool1", "pool", "conv1"},
                        {"conv2", "conv", "pool1"}, {"pool2", "pool", "conv2"},
                        {"ip1", "innerproduct", "pool2"},
                        {"relu1", "relu", "ip1"},   {"ip2", "innerproduct", "ip1"},
                        {"prob", "softmax", "ip2"}};
  for (const Spec& spec : specs) {
    V1LayerParameter* layer = net.add_layers();
    layer->add_bottom(spec.bottom);
    layer->add_top(std::string(spec.type) == "relu" ? spec.bottom : spec.name);
    V0LayerParameter* v0 = layer->mutable_layer();
    v0->set_name(spec.name);
    v0->set_type(spec.type);
    const std::string type = spec.type;
    if (type == "conv") {
      v0->set_num_output(std::string(spec.name) == "conv1" ? 20 : 50);
      v0->set_kernelsize(5);
    } else if (type == "pool") {
      v0->set_pool(V0LayerParameter::MAX);
      v0->set_kernelsize(2);
      v0->set_stride(2);
    } else if (type == "innerproduct") {
      v0->set_num_output(std::string(spec.name) == "ip1" ? 500 : 10);
    }
    for (const LayerParameter& l : weights.layer()) {
      if (l.name() != spec.name) continue;
      for (const BlobProto& b : l.blobs()) *v0->add_blobs() = b;
    }
  }
  return net;
}

// The same net in the V1 format (`layers { type: CONVOLUTION }`), blobs in
// the legacy 4-D form.
NetParameter V1LeNet(const NetParameter& weights) {
  NetParameter net;
  ReadProtoFromTextFile(
      SourcePath("examples/fashion_mnist/lenet_v1_train_test.prototxt"), &net);
  for (V1LayerParameter& layer : *net.mutable_layers()) {
    for (const LayerParameter& l : weights.layer()) {
      if (l.name() != layer.name()) continue;
      for (const BlobProto& b : l.blobs()) {
        BlobProto* legacy = layer.add_blobs();
        vector<int64_t> dims(b.shape().dim().begin(), b.shape().dim().end());
        while (dims.size() < 4) dims.insert(dims.begin(), 1);
        legacy->set_num(static_cast<int>(dims[0]));
        legacy->set_channels(static_cast<int>(dims[1]));
        legacy->set_height(static_cast<int>(dims[2]));
        legacy->set_width(static_cast<int>(dims[3]));
        *legacy->mutable_data() = b.data();
      }
    }
  }
  return net;
}

NetParameter WeightsOf(const std::string& deploy) {
  NetParameter param;
  ReadNetParamsFromTextFile(SourcePath(deploy), &param);
  param.mutable_layer(0)->mutable_input_param()->mutable_shape(0)->set_dim(0,
                                                                           1);
  Net<float> net(param);
  NetParameter weights;
  net.ToProto(&weights);
  return weights;
}

void NetSeeds(const fs::path& out) {
  Corpus nets(out, "net_prototxt");
  Corpus solvers(out, "solver_prototxt");
  for (const fs::path& file : RepoPrototxts()) {
    const std::string text = ReadFileToString(file.string());
    const bool is_solver = file.filename().string().find("solver") !=
                           std::string::npos;
    (is_solver ? solvers : nets).Add(SeedName(file), text);
  }
  // Text V0 nets carry no weights in practice.
  std::string v0;
  google::protobuf::TextFormat::PrintToString(V0LeNet(NetParameter()), &v0);
  nets.Add("lenet_v0.prototxt", v0);
}

void WeightSeeds(const fs::path& out) {
  Corpus corpus(out, "caffemodel");
  const NetParameter lenet = WeightsOf("models/lenet/deploy.prototxt");
  corpus.Add("lenet.caffemodel", Serialize(lenet));
  corpus.Add("lenet_v1.caffemodel", Serialize(V1LeNet(lenet)));
  corpus.Add("lenet_v0.caffemodel", Serialize(V0LeNet(lenet)));
  corpus.Add("cifar10_quick.caffemodel",
             Serialize(WeightsOf("models/cifar10_quick/deploy.prototxt")));
  // A blob stored as doubles with a diff, and one as a mean file is.
  NetParameter doubles = lenet;
  BlobProto* blob = doubles.mutable_layer(1)->mutable_blobs(1);
  for (float v : blob->data()) {
    blob->add_double_data(v);
    blob->add_double_diff(-v);
  }
  blob->clear_data();
  corpus.Add("lenet_double.caffemodel", Serialize(doubles));
}

void StateSeeds(const fs::path& out) {
  Corpus corpus(out, "solverstate");
  const std::string prefix = ScratchDir() + "/seed";
  for (int t = 0; t < 6; ++t) {
    auto solver = MakeStateSolver<float>(kSolverTypes[t], prefix);
    solver->Step(3);
    solver->Snapshot();
    SolverState state;
    ReadProtoFromBinaryFile(prefix + "_iter_3.solverstate", &state);
    state.set_learned_net("snap_iter_0.caffemodel");
    corpus.Add(StrCat(kSolverTypes[t], ".solverstate"),
               std::string(1, static_cast<char>(t)) + Serialize(state));
  }
}

// Up to `n` 28x28 grey images: Fashion-MNIST's first test images, else
// synthetic ones.
vector<cv::Mat> Images(int n) {
  vector<cv::Mat> images;
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  const std::string db_path = ScratchDir() + "/fashion_mnist";
  try {
    ConvertMnistToDB(dir + "t10k-images-idx3-ubyte.gz",
                     dir + "t10k-labels-idx1-ubyte.gz", db_path);
    std::unique_ptr<db::DB> db = db::GetDB("lmdb");
    db->Open(db_path, db::Mode::READ);
    auto cursor = db->NewCursor();
    for (int i = 0; i < n && cursor->valid(); ++i, cursor->Next()) {
      Datum datum;
      CHECK(datum.ParseFromString(cursor->value()));
      cv::Mat image(datum.height(), datum.width(), CV_8UC1);
      std::memcpy(image.data, datum.data().data(), datum.data().size());
      images.push_back(image);
    }
  } catch (const Error& e) {
    std::printf("fuzz_seeds: no Fashion-MNIST (%s); synthetic images\n",
                e.what());
  }
  while (static_cast<int>(images.size()) < n) {
    cv::Mat image(28, 28, CV_8UC1);
    for (int r = 0; r < 28; ++r) {
      for (int c = 0; c < 28; ++c) {
        image.at<uint8_t>(r, c) =
            static_cast<uint8_t>((r * 9 + c * 5 + images.size() * 31) & 255);
      }
    }
    images.push_back(image);
  }
  return images;
}

std::string Encode(const cv::Mat& image, const std::string& ext) {
  std::vector<uchar> bytes;
  CHECK(poseidon::codecs::Encode(ext, image, &bytes)) << ext;
  return std::string(bytes.begin(), bytes.end());
}

void DatumSeeds(const fs::path& out, const vector<cv::Mat>& images) {
  Corpus corpus(out, "datum");
  vector<std::string> raw, floats, encoded;
  for (size_t i = 0; i < images.size(); ++i) {
    Datum datum;
    CVMatToDatum(images[i], &datum);
    datum.set_label(static_cast<int>(i));
    raw.push_back(Serialize(datum));
    Datum f = datum;
    f.clear_data();
    for (uint8_t v : datum.data()) f.add_float_data(v / 255.0f);
    floats.push_back(Serialize(f));
    Datum e;
    e.set_encoded(true);
    e.set_label(static_cast<int>(i));
    cv::Mat color;
    cv::cvtColor(images[i], color, cv::COLOR_GRAY2BGR);
    e.set_data(Encode(i % 2 ? color : images[i], i % 3 ? ".png" : ".jpg"));
    encoded.push_back(Serialize(e));
  }
  const uint8_t plain[4] = {0, 0, 1, 0};
  const uint8_t crop_mirror[4] = {1 | 2 | 16 | 32, 24, 2, 7};
  const uint8_t color_crop[4] = {1 | 4 | 32, 20, 3, 3};
  corpus.Add("raw", EncodeRecords(plain, raw));
  corpus.Add("raw_crop_mirror", EncodeRecords(crop_mirror, raw));
  corpus.Add("float", EncodeRecords(plain, floats));
  corpus.Add("float_mean", EncodeRecords(crop_mirror, floats));
  corpus.Add("encoded", EncodeRecords(plain, encoded));
  corpus.Add("encoded_color", EncodeRecords(color_crop, encoded));
}

void ImageSeeds(const fs::path& out, const vector<cv::Mat>& images) {
  Corpus corpus(out, "image");
  const uint8_t options[][4] = {{0, 0, 0, 0},       {1 | 2, 20, 0, 0},
                                {1 | 4 | 8, 0, 16, 0}, {2 | 16, 40, 8, 0}};
  int k = 0;
  for (const char* ext : {".png", ".jpg", ".bmp", ".pgm", ".ppm", ".tiff",
                          ".webp", ".pbm"}) {
    cv::Mat image = images[k % images.size()];
    if (std::string(ext) != ".pgm" && std::string(ext) != ".pbm" && k % 2) {
      cv::cvtColor(image, image, cv::COLOR_GRAY2BGR);
    }
    std::string bytes;
    try {
      bytes = Encode(image, ext);
    } catch (const cv::Exception&) {
      continue;  // a codec this OpenCV lacks
    }
    corpus.Add(StrCat("image", ext), EncodeRecords(options[k % 4], {bytes}));
    ++k;
  }
}

void Hdf5Seeds(const fs::path& out) {
  Corpus corpus(out, "hdf5");
  const std::string path = ScratchDir() + "/seed.h5";
  for (int variant = 0; variant < 3; ++variant) {
    const int n = 3 + variant;
    const vector<int> shape =
        variant == 2 ? vector<int>{n, 4} : vector<int>{n, 2, 3, 3};
    int count = 1;
    for (int d : shape) count *= d;
    vector<float> data(count);
    vector<double> label(n);
    for (int i = 0; i < count; ++i) data[i] = 0.25f * i;
    for (int i = 0; i < n; ++i) label[i] = i % 2;
    // Structured (fuzz_hdf5's default mode): the datasets described, data
    // as float (type 5), label as double (type 6).
    std::string spec(16, '\0');
    spec[0] = 0;
    spec[1] = 5;
    spec[2] = static_cast<char>(shape.size());
    for (size_t i = 0; i < shape.size(); ++i) {
      spec[3 + i] = static_cast<char>(shape[i]);
    }
    spec[8] = 1;
    spec[9] = 6;
    spec[10] = 1;
    spec[11] = static_cast<char>(n);
    const uint8_t options[4] = {static_cast<uint8_t>(variant),
                                static_cast<uint8_t>(variant & 1),
                                static_cast<uint8_t>(3 + variant), 0};
    corpus.Add(StrCat("structured", variant),
               EncodeRecords(options,
                             {spec,
                              std::string(reinterpret_cast<char*>(data.data()),
                                          data.size() * sizeof(float)),
                              std::string(reinterpret_cast<char*>(label.data()),
                                          label.size() * sizeof(double))}));
    // Raw (POSEIDON_FUZZ_HDF5_RAW=1): the file written by Poseidon.
    {
      Hdf5File file = Hdf5File::Create(path);
      file.WriteDataset("data", shape, data.data());
      file.WriteDataset("label", {n}, label.data());
      file.Close();
    }
    const uint8_t raw_options[4] = {options[0], options[1], options[2], 1};
    corpus.Add(StrCat("raw", variant, ".h5"),
               EncodeRecords(raw_options, {ReadFileToString(path)}));
  }
}

}  // namespace
}  // namespace fuzz
}  // namespace poseidon

int main(int argc, char** argv) {
  using namespace poseidon;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  fuzz::Init();
  SetHostAllocationLimit(0);
  try {
    const std::filesystem::path out = argv[1];
    fuzz::NetSeeds(out);
    fuzz::WeightSeeds(out);
    fuzz::StateSeeds(out);
    const vector<cv::Mat> images = fuzz::Images(6);
    fuzz::DatumSeeds(out, images);
    fuzz::ImageSeeds(out, images);
    fuzz::Hdf5Seeds(out);
    std::printf("fuzz_seeds: %-16s %3d seeds in %s\n", "dist_messages",
                fuzz::WriteDistSeeds(out.string()),
                (out / "dist_messages").c_str());
    std::printf("fuzz_seeds: %-16s %3d seeds in %s\n", "layer_setup",
                fuzz::WriteLayerSetupSeeds(out.string()),
                (out / "layer_setup").c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
