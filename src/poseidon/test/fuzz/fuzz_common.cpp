// Set-up shared by the fuzz harnesses: logging, limits, a scratch directory.
#include "fuzz_common.hpp"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/stubs/logging.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "poseidon/solver_factory.hpp"
#include "poseidon/util/alloc_guard.hpp"
#include "poseidon/util/io.hpp"

namespace poseidon {
namespace fuzz {
namespace {

void RemoveScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(ScratchDir(), ec);
}

}  // namespace

void Init() {
  static const bool done = [] {
    FLAGS_logtostderr = true;
    FLAGS_minloglevel = 2;  // errors and up
    google::InitGoogleLogging("poseidon_fuzz");
    // protobuf's own complaints (invalid UTF-8 in a string field, on every
    // other input) would cost more than the input itself.
    google::protobuf::SetLogHandler(nullptr);
    Poseidon::set_num_threads(1);
    Poseidon::set_random_seed(1);
    SetHostAllocationLimit(kAllocationLimit);
    std::atexit(RemoveScratchDir);
    return true;
  }();
  (void)done;
}

const std::string& ScratchDir() {
  // Never destroyed: RemoveScratchDir reads it at exit, after the static
  // objects made later than its registration are gone.
  static const std::string* const dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/psd_fuzz.XXXXXX";
    CHECK(::mkdtemp(pattern.data()) != nullptr) << "mkdtemp " << pattern;
    return new std::string(pattern);
  }();
  return *dir;
}

std::string WriteScratchFile(const std::string& name, const uint8_t* data,
                             size_t size) {
  const std::string path = ScratchDir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data),
            static_cast<std::streamsize>(size));
  CHECK(out.good()) << "cannot write " << path;
  return path;
}

std::string WriteScratchFile(const std::string& name,
                             const std::string& contents) {
  return WriteScratchFile(
      name, reinterpret_cast<const uint8_t*>(contents.data()), contents.size());
}

void ConfineFilePaths(google::protobuf::Message* message) {
  static const std::set<std::string> kPathFields = {
      "source",          "mean_file", "file_name", "root_folder",
      "snapshot_prefix", "net",       "train_net", "test_net",
      "weights"};
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Descriptor* descriptor = message->GetDescriptor();
  const google::protobuf::Reflection* reflection = message->GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
      if (field->is_repeated()) {
        for (int j = 0; j < reflection->FieldSize(*message, field); ++j) {
          ConfineFilePaths(
              reflection->MutableRepeatedMessage(message, field, j));
        }
      } else if (reflection->HasField(*message, field)) {
        ConfineFilePaths(reflection->MutableMessage(message, field));
      }
      continue;
    }
    if (field->type() != FieldDescriptor::TYPE_STRING ||
        kPathFields.count(field->name()) == 0) {
      continue;
    }
    const std::string confined = ScratchDir() + "/confined";
    if (field->is_repeated()) {
      for (int j = 0; j < reflection->FieldSize(*message, field); ++j) {
        reflection->SetRepeatedString(message, field, j, confined);
      }
    } else if (reflection->HasField(*message, field)) {
      reflection->SetString(message, field, confined);
    }
  }
}

std::string SourcePath(const std::string& relative) {
  return std::string(POSEIDON_SOURCE_DIR) + "/" + relative;
}

const char* const kSolverTypes[6] = {"SGD",     "Nesterov", "AdaGrad",
                                     "RMSProp", "AdaDelta", "Adam"};

template <typename Dtype>
std::unique_ptr<Solver<Dtype>> MakeStateSolver(const std::string& type,
                                               const std::string& prefix) {
  static const char kSolver[] = R"(
    base_lr: 0.01 weight_decay: 0.001 lr_policy: "step" stepsize: 2
    gamma: 0.5 random_seed: 3
    net_param {
      name: "fuzz_state_net"
      layer { name: "data" type: "DummyData" top: "data" top: "label"
        dummy_data_param { shape { dim: 4 dim: 3 } shape { dim: 4 }
                           data_filler { type: "gaussian" }
                           data_filler { type: "constant" value: 1 } } }
      layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 2
                              weight_filler { type: "xavier" } } }
      layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip"
        bottom: "label" top: "loss" }
    })";
  SolverParameter param;
  ReadProtoFromTextString(kSolver, "fuzz solver", &param);
  param.set_type(type);
  if (type != "AdaGrad" && type != "RMSProp") param.set_momentum(0.9f);
  param.set_snapshot_prefix(prefix);
  return CreateSolver<Dtype>(param);
}

template std::unique_ptr<Solver<float>> MakeStateSolver<float>(
    const std::string&, const std::string&);

}  // namespace fuzz
}  // namespace poseidon
