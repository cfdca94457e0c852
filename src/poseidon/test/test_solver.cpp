// Solver: construction and its errors, the registry, prototxt upgrades, the
// training loop (tests, callbacks, actions, smoothed loss), snapshots and
// resuming, divergence handling and atomic snapshot files.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "poseidon/sgd_solvers.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/io.hpp"
#include "solver_test_util.hpp"
#include "test_util.hpp"
#ifdef USE_HDF5
#include "poseidon/util/hdf5.hpp"
#endif

namespace poseidon {
namespace {

namespace fs = std::filesystem;
using std::unique_ptr;
using std::vector;

template <typename TypeParam>
class SolverTest : public test::MultiDeviceTest<TypeParam> {
 public:
  using Dtype = typename TypeParam::Dtype;

  SolverTest() : dir_(test::MakeTempDir()) {}
  ~SolverTest() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, ec);
    fs::remove_all(dir_, ec);
  }

  unique_ptr<Solver<Dtype>> Make(const string& extra, int batch = 4) {
    unique_ptr<Solver<Dtype>> solver =
        CreateSolver<Dtype>(test::SolverTestParam(extra, batch));
    test::FillSolverTestInputs(solver->net().get());
    for (const auto& net : solver->test_nets()) {
      test::FillSolverTestInputs(net.get());
    }
    return solver;
  }

  string Prefix(const string& name = "snap") const { return dir_ + "/" + name; }

  // Writes `text` to dir_/name and returns the path.
  string WriteFile(const string& name, const string& text) const {
    const string path = dir_ + "/" + name;
    WriteFileAtomically(path, text);
    return path;
  }

  string dir_;
};

TYPED_TEST_SUITE(SolverTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

template <typename Dtype>
void ExpectBitIdentical(const vector<vector<Dtype>>& a,
                        const vector<vector<Dtype>>& b, const string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t k = 0; k < a.size(); ++k) {
    ASSERT_EQ(a[k].size(), b[k].size()) << what;
    for (size_t i = 0; i < a[k].size(); ++i) {
      ASSERT_EQ(a[k][i], b[k][i])
          << what << ": param " << k << " element " << i << " differs";
    }
  }
}

TYPED_TEST(SolverTest, RegistryKnowsEveryType) {
  using Dtype = typename TypeParam::Dtype;
  const vector<string> types = SolverRegistry<Dtype>::SolverTypeList();
  for (const char* type :
       {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"}) {
    EXPECT_TRUE(SolverRegistry<Dtype>::Has(type)) << type;
    EXPECT_NE(std::find(types.begin(), types.end(), type), types.end());
    auto solver = this->Make(StrCat("type: '", type, "'"));
    EXPECT_EQ(string(solver->type()), type);
  }
}

TYPED_TEST(SolverTest, UnknownTypeListsKnownOnes) {
  try {
    this->Make("type: 'Lion'");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const string msg = e.what();
    EXPECT_NE(msg.find("Lion"), string::npos) << msg;
    EXPECT_NE(msg.find("Adam"), string::npos) << msg;
    EXPECT_NE(msg.find("Nesterov"), string::npos) << msg;
  }
}

TYPED_TEST(SolverTest, TrainNetMustBeGivenExactlyOnce) {
  using Dtype = typename TypeParam::Dtype;
  const string net_file =
      this->WriteFile("net.prototxt", test::SolverTestNet(4));
  // Both train_net_param (from SolverTestParam) and net.
  EXPECT_THROW(this->Make(StrCat("net: '", net_file, "'")), ConfigError);
  EXPECT_THROW(this->Make(StrCat("train_net: '", net_file, "'")), ConfigError);
  SolverParameter none;
  none.set_lr_policy("fixed");
  EXPECT_THROW(CreateSolver<Dtype>(none), ConfigError);
  // net and train_net without any inline net.
  SolverParameter two;
  two.set_lr_policy("fixed");
  two.set_net(net_file);
  two.set_train_net(net_file);
  try {
    CreateSolver<Dtype>(two);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(string(e.what()).find("train_net"), string::npos) << e.what();
  }
}

TYPED_TEST(SolverTest, TestNetConfigErrors) {
  using Dtype = typename TypeParam::Dtype;
  // test_net_param without a matching test_iter.
  EXPECT_THROW(this->Make(StrCat("test_interval: 5 test_net_param { ",
                                 test::SolverTestNet(2), " }")),
               ConfigError);
  // Two test_iter for one test net.
  EXPECT_THROW(this->Make(StrCat("test_interval: 5 test_iter: 1 test_iter: 1 "
                                 "test_net_param { ",
                                 test::SolverTestNet(2), " }")),
               ConfigError);
  // A test net but no test_interval.
  EXPECT_THROW(this->Make(StrCat("test_iter: 1 test_net_param { ",
                                 test::SolverTestNet(2), " }")),
               ConfigError);
  // test_state count must match.
  EXPECT_THROW(
      this->Make(StrCat("test_interval: 5 test_iter: 1 test_net_param { ",
                        test::SolverTestNet(2),
                        " } test_state { stage: 'a' } test_state { }")),
      ConfigError);
#ifndef USE_HDF5
  SolverParameter hdf5 = test::SolverTestParam("snapshot_format: HDF5");
  try {
    CreateSolver<Dtype>(hdf5);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(string(e.what()).find("BINARYPROTO"), string::npos);
  }
#endif
  EXPECT_THROW(this->Make("average_loss: 0"), ConfigError);
  EXPECT_THROW(this->Make("iter_size: 0"), ConfigError);
}

TYPED_TEST(SolverTest, GenericNetGivesTrainAndTestInstances) {
  using Dtype = typename TypeParam::Dtype;
  SolverParameter param;
  ReadProtoFromTextString(
      StrCat("net_param { ", test::SolverTestNet(4),
             " } test_iter: 2 test_iter: 1 test_interval: 10 "
             "lr_policy: 'fixed' base_lr: 0.1 random_seed: 3"),
      "generic", &param);
  auto solver = CreateSolver<Dtype>(param);
  EXPECT_EQ(solver->net()->phase(), TRAIN);
  ASSERT_EQ(solver->test_nets().size(), 2u);
  for (const auto& net : solver->test_nets()) {
    EXPECT_EQ(net->phase(), TEST);
    // Shares the train net's weights.
    EXPECT_EQ(net->layer_by_name("ip1")->blobs()[0]->cpu_data(),
              solver->net()->layer_by_name("ip1")->blobs()[0]->cpu_data());
  }
}

TYPED_TEST(SolverTest, DeprecatedSolverTypeIsUpgraded) {
  const string net_file =
      this->WriteFile("net.prototxt", test::SolverTestNet(4));
  const string solver_file = this->WriteFile(
      "adam_solver.prototxt", StrCat("net: '", net_file,
                                     "' solver_type: ADAM lr_policy: 'fixed' "
                                     "base_lr: 0.01"));
  SolverParameter param;
  ReadSolverParamsFromTextFile(solver_file, &param);
  EXPECT_EQ(param.type(), "Adam");
  EXPECT_FALSE(param.has_solver_type());
  // Caffe's default prefix: the solver file without its extension.
  EXPECT_EQ(param.snapshot_prefix(), this->dir_ + "/adam_solver");
  using Dtype = typename TypeParam::Dtype;
  EXPECT_EQ(string(CreateSolver<Dtype>(param)->type()), "Adam");
  // An enum given directly in a SolverParameter is upgraded as well.
  SolverParameter direct = test::SolverTestParam("solver_type: NESTEROV");
  EXPECT_EQ(string(CreateSolver<Dtype>(direct)->type()), "Nesterov");

  const string conflicting = this->WriteFile(
      "conflict.prototxt", StrCat("net: '", net_file,
                                  "' solver_type: ADAM type: 'SGD' "
                                  "lr_policy: 'fixed'"));
  try {
    ReadSolverParamsFromTextFile(conflicting, &param);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(string(e.what()).find("conflict.prototxt"), string::npos);
  }
  // Agreeing forms are accepted.
  const string agreeing = this->WriteFile(
      "agree.prototxt", StrCat("net: '", net_file,
                               "' solver_type: ADAM type: 'Adam' "
                               "lr_policy: 'fixed'"));
  SolverParameter ok;
  ReadSolverParamsFromTextFile(agreeing, &ok);
  EXPECT_EQ(ok.type(), "Adam");
}

TYPED_TEST(SolverTest, SnapshotPrefixDirectoryAndRelativeNetPath) {
  using Dtype = typename TypeParam::Dtype;
  this->WriteFile("net.prototxt", test::SolverTestNet(4));
  fs::create_directory(this->dir_ + "/snaps");
  const string solver_file = this->WriteFile(
      "lenet_solver.prototxt",
      StrCat("net: 'net.prototxt' snapshot_prefix: '", this->dir_,
             "/snaps' lr_policy: 'fixed' base_lr: 0.1 max_iter: 1"));
  SolverParameter param;
  ReadSolverParamsFromTextFile(solver_file, &param);
  EXPECT_EQ(param.snapshot_prefix(), this->dir_ + "/snaps/lenet_solver");
  // A relative net path is relative to the working directory, as in Caffe.
  const fs::path cwd = fs::current_path();
  fs::current_path(this->dir_);
  unique_ptr<Solver<Dtype>> solver;
  EXPECT_NO_THROW(solver = std::make_unique<SGDSolver<Dtype>>(solver_file));
  fs::current_path(cwd);
  ASSERT_NE(solver, nullptr);
  EXPECT_THROW(SGDSolver<Dtype>{solver_file}, IOError);
}

TYPED_TEST(SolverTest, RandomSeedMakesInitialWeightsReproducible) {
  using Dtype = typename TypeParam::Dtype;
  auto a = this->Make("random_seed: 42");
  auto b = this->Make("random_seed: 42");
  auto c = this->Make("random_seed: 43");
  ExpectBitIdentical(test::LearnableValues(*a->net()),
                     test::LearnableValues(*b->net()), "same seed");
  EXPECT_NE(test::LearnableValues(*a->net())[0],
            test::LearnableValues(*c->net())[0]);
}

TYPED_TEST(SolverTest, WeightsFieldInitialisesTrainAndTestNets) {
  auto source = this->Make("random_seed: 11");
  NetParameter trained;
  source->net()->ToProto(&trained);
  const string file = this->dir_ + "/init.caffemodel";
  WriteProtoToBinaryFile(trained, file);
  auto solver = this->Make(StrCat("random_seed: 12 weights: '", file,
                                  "' test_iter: 1 test_interval: 10 ",
                                  "test_net_param { ", test::SolverTestNet(4),
                                  " }"));
  ExpectBitIdentical(test::LearnableValues(*source->net()),
                     test::LearnableValues(*solver->net()), "weights:");
  ExpectBitIdentical(test::LearnableValues(*source->net()),
                     test::LearnableValues(*solver->test_nets()[0]),
                     "weights: in the test net");
  EXPECT_THROW(this->Make(StrCat("weights: '", this->dir_, "/none'")),
               IOError);
}

// The pycaffe-style pair of callbacks runs in order each iteration (every
// observation point has its own test in test_solver_observers.cpp).
TYPED_TEST(SolverTest, CallbacksAndActions) {
  auto solver = this->Make(StrCat("snapshot_prefix: '", this->Prefix(), "'"));
  string events;
  Subscription start = solver->add_on_start([&] { events += "s"; });
  Subscription ready = solver->add_on_gradients_ready([&] { events += "g"; });
  int function_calls = 0;
  solver->add_on_gradients_ready([&] { ++function_calls; }).Detach();
  solver->Step(3);
  EXPECT_EQ(events, "sgsgsg");
  EXPECT_EQ(function_calls, 3);

  // SNAPSHOT writes one without stopping; STOP ends the Step early.
  vector<SolverAction> actions = {SolverAction::NONE, SolverAction::SNAPSHOT,
                                  SolverAction::STOP};
  size_t next = 0;
  solver->SetActionFunction([&] {
    return next < actions.size() ? actions[next++] : SolverAction::NONE;
  });
  solver->Step(10);
  EXPECT_EQ(solver->iter(), 6);
  EXPECT_TRUE(solver->requested_early_exit());
  EXPECT_TRUE(FileExists(this->Prefix() + "_iter_5.caffemodel"));
  EXPECT_TRUE(FileExists(this->Prefix() + "_iter_5.solverstate"));
  EXPECT_FALSE(FileExists(this->Prefix() + "_iter_6.caffemodel"));
  EXPECT_EQ(solver->last_snapshot(), this->Prefix() + "_iter_5.solverstate");
}

TYPED_TEST(SolverTest, SmoothedLossAveragesLastIterations) {
  using Dtype = typename TypeParam::Dtype;
  auto solver = this->Make("average_loss: 3 display: 1");
  vector<double> losses;
  Net<Dtype>* net = solver->net().get();
  solver->add_on_gradients_ready(
      [&] { losses.push_back(net->blob_by_name("loss")->cpu_data()[0]); }).Detach();
  solver->Step(5);
  ASSERT_EQ(losses.size(), 5u);
  const double expected = (losses[2] + losses[3] + losses[4]) / 3;
  EXPECT_NEAR(solver->smoothed_loss(), expected, 1e-5 * expected);
}

TYPED_TEST(SolverTest, TestsOnScheduleWithSharedWeights) {
  using Dtype = typename TypeParam::Dtype;
  auto solver =
      this->Make(StrCat("test_iter: 2 test_interval: 2 ", "test_net_param { ",
                        test::SolverTestNet(4), " }"));
  ASSERT_EQ(solver->test_nets().size(), 1u);
  Net<Dtype>* test_net = solver->test_nets()[0].get();
  int forwards = 0;
  test_net->add_before_forward([&](int layer) { forwards += layer == 0; }).Detach();
  solver->Step(4);
  // At iterations 0 (test_initialization) and 2, test_iter passes each.
  EXPECT_EQ(forwards, 4);
  // The reported score is the test net's loss with the trained weights,
  // which equals the train net's loss on the same data.
  solver->TestAll();
  Dtype train_loss;
  solver->net()->Forward(&train_loss);
  ASSERT_EQ(solver->test_scores()[0].size(), 1u);
  EXPECT_NEAR(solver->test_scores()[0][0], train_loss,
              1e-5 * std::fabs(train_loss));

  auto quiet = this->Make(
      StrCat("test_iter: 1 test_interval: 2 ", "test_initialization: false ",
             "test_net_param { ", test::SolverTestNet(4), " }"));
  int quiet_forwards = 0;
  quiet->test_nets()[0]->add_before_forward(
      [&](int layer) { quiet_forwards += layer == 0; }).Detach();
  quiet->Step(3);
  EXPECT_EQ(quiet_forwards, 1);  // only at iteration 2
}

TYPED_TEST(SolverTest, SolveSnapshotsOnScheduleAndAtTheEnd) {
  auto solver = this->Make(StrCat("max_iter: 5 snapshot: 2 display: 2 ",
                                  "snapshot_prefix: '", this->Prefix(), "'"));
  solver->Solve();
  EXPECT_EQ(solver->iter(), 5);
  for (int it : {2, 4, 5}) {
    EXPECT_TRUE(FileExists(StrCat(this->Prefix(), "_iter_", it, ".caffemodel")))
        << it;
    EXPECT_TRUE(
        FileExists(StrCat(this->Prefix(), "_iter_", it, ".solverstate")))
        << it;
  }
  SolverState state;
  ReadProtoFromBinaryFile(this->Prefix() + "_iter_5.solverstate", &state);
  EXPECT_EQ(state.iter(), 5);
  EXPECT_EQ(state.learned_net(), this->Prefix() + "_iter_5.caffemodel");
  EXPECT_EQ(state.history_size(), 4);

  auto no_final =
      this->Make(StrCat("max_iter: 3 snapshot: 2 snapshot_after_train: false ",
                        "snapshot_prefix: '", this->Prefix("nofinal"), "'"));
  no_final->Solve();
  EXPECT_TRUE(FileExists(this->Prefix("nofinal") + "_iter_2.caffemodel"));
  EXPECT_FALSE(FileExists(this->Prefix("nofinal") + "_iter_3.caffemodel"));
}

// N iterations straight == N/2, snapshot, restore in a new solver, N/2;
// `hdf5` writes Caffe's HDF5 snapshots instead of binary protobuf.
template <typename TypeParam>
void ExpectResumeIsExact(SolverTest<TypeParam>* t, const string& type,
                         bool hdf5 = false) {
  using Dtype = typename TypeParam::Dtype;
  const string settings = StrCat(
      "type: '", type, "' base_lr: 0.05 lr_policy: 'multistep' gamma: 0.5 ",
      "stepvalue: 1 stepvalue: 2 weight_decay: 0.01 ",
      type == "AdaGrad" || type == "RMSProp" ? "" : "momentum: 0.9 ",
      hdf5 ? "snapshot_format: HDF5 " : "", "snapshot_prefix: '",
      t->Prefix(type), "'");
  auto straight = t->Make(settings);
  straight->Step(4);

  auto first = t->Make(settings);
  first->Step(2);
  first->Snapshot();
  const string state = t->Prefix(type) + (hdf5 ? "_iter_2.solverstate.h5"
                                               : "_iter_2.solverstate");
  ASSERT_TRUE(FileExists(state));
  EXPECT_EQ(first->last_snapshot(), state);
  EXPECT_TRUE(FileExists(t->Prefix(type) + (hdf5 ? "_iter_2.caffemodel.h5"
                                                 : "_iter_2.caffemodel")));

  auto resumed = t->Make(StrCat(settings, " random_seed: 99"));
  resumed->Restore(state);
  EXPECT_EQ(resumed->iter(), 2);
  ExpectBitIdentical(test::LearnableValues(*first->net()),
                     test::LearnableValues(*resumed->net()),
                     type + " restored weights");
  resumed->Step(2);
  EXPECT_EQ(resumed->iter(), 4);
  ExpectBitIdentical(test::LearnableValues(*straight->net()),
                     test::LearnableValues(*resumed->net()),
                     type + " resumed training");
}

TYPED_TEST(SolverTest, ResumeIsBitIdentical) {
  for (const char* type :
       {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"}) {
    ExpectResumeIsExact(this, type);
  }
}

#ifdef USE_HDF5
// snapshot_format: HDF5, as Caffe writes it: weights in .caffemodel.h5
// (Net::ToHDF5), the state in .solverstate.h5 with scalar iter and
// current_step, the learned_net string and history/<i>.
TYPED_TEST(SolverTest, Hdf5SnapshotsResumeBitIdentically) {
  for (const char* type : {"SGD", "AdaDelta", "Adam"}) {
    ExpectResumeIsExact(this, type, /*hdf5=*/true);
  }
  const Hdf5File state =
      Hdf5File::OpenForRead(this->Prefix("Adam") + "_iter_2.solverstate.h5");
  EXPECT_EQ(state.ReadInt("iter"), 2);
  EXPECT_EQ(state.ReadInt("current_step"), 1);  // stepped at iteration 1
  EXPECT_EQ(state.ReadString("learned_net"),
            this->Prefix("Adam") + "_iter_2.caffemodel.h5");
  EXPECT_EQ(state.ChildNames("history").size(), 8u);  // 2 per param
  EXPECT_EQ(state.DatasetShape("history/0"), (vector<int>{4, 3}));
  // A binary state does not restore from an HDF5 name, nor the reverse.
  auto sgd = this->Make("type: 'SGD'");
  EXPECT_THROW(sgd->Restore(this->Prefix("Adam") + "_iter_2.solverstate.h5"),
               ConfigError);
  EXPECT_EQ(sgd->iter(), 0);
  EXPECT_THROW(sgd->Restore(this->Prefix("SGD") + "_iter_2.caffemodel.h5"),
               IOError);
}
#endif  // USE_HDF5

TYPED_TEST(SolverTest, SolveResumesFromState) {
  const string settings = StrCat("max_iter: 4 momentum: 0.9 ",
                                 "snapshot_prefix: '", this->Prefix(), "'");
  auto straight = this->Make(settings);
  straight->Step(4);
  auto first = this->Make(settings);
  first->Step(2);
  first->Snapshot();
  auto resumed = this->Make(settings);
  resumed->Solve(this->Prefix() + "_iter_2.solverstate");
  EXPECT_EQ(resumed->iter(), 4);
  ExpectBitIdentical(test::LearnableValues(*straight->net()),
                     test::LearnableValues(*resumed->net()), "Solve(resume)");
}

TYPED_TEST(SolverTest, RestoreFindsWeightsBesideMovedState) {
  auto solver = this->Make(
      StrCat("momentum: 0.9 snapshot_prefix: '", this->Prefix(), "'"));
  solver->Step(2);
  solver->Snapshot();
  const auto weights = test::LearnableValues(*solver->net());
  // Move both files elsewhere: learned_net's recorded path no longer exists.
  const string moved = this->dir_ + "/moved";
  fs::create_directory(moved);
  for (const char* ext : {".caffemodel", ".solverstate"}) {
    fs::rename(this->Prefix() + "_iter_2" + ext, moved + "/snap_iter_2" + ext);
  }
  auto fresh = this->Make("momentum: 0.9 random_seed: 5");
  fresh->Restore(moved + "/snap_iter_2.solverstate");
  EXPECT_EQ(fresh->iter(), 2);
  ExpectBitIdentical(weights, test::LearnableValues(*fresh->net()),
                     "weights found beside the state file");

  fs::remove(moved + "/snap_iter_2.caffemodel");
  auto lost = this->Make("momentum: 0.9");
  EXPECT_THROW(lost->Restore(moved + "/snap_iter_2.solverstate"), IOError);
  EXPECT_EQ(lost->iter(), 0);
}

TYPED_TEST(SolverTest, RestoreRejectsForeignState) {
  auto adam = this->Make(
      StrCat("type: 'Adam' snapshot_prefix: '", this->Prefix("adam"), "'"));
  adam->Step(1);
  adam->Snapshot();
  auto sgd = this->Make("type: 'SGD'");
  const auto before = test::LearnableValues(*sgd->net());
  EXPECT_THROW(sgd->Restore(this->Prefix("adam") + "_iter_1.solverstate"),
               ConfigError);
  EXPECT_EQ(sgd->iter(), 0);
  ExpectBitIdentical(before, test::LearnableValues(*sgd->net()),
                     "a rejected restore changes nothing");
  EXPECT_THROW(sgd->Restore(this->dir_ + "/missing.solverstate"), IOError);
  EXPECT_THROW(sgd->Restore(this->dir_ + "/state.h5"), Error);
  const string garbage = this->WriteFile("garbage.solverstate", "\xff\xff\x01");
  EXPECT_THROW(sgd->Restore(garbage), IOError);
}

TYPED_TEST(SolverTest, DivergenceThrowsAndKeepsLastGoodSnapshot) {
  using Dtype = typename TypeParam::Dtype;
  auto solver = this->Make(StrCat("base_lr: 1000 snapshot: 1 ",
                                  "snapshot_prefix: '", this->Prefix(), "'"));
  string message;
  try {
    solver->Step(2000);
    FAIL() << "training with base_lr 1000 did not diverge";
  } catch (const NumericError& e) {
    message = e.what();
  }
  const string last = solver->last_snapshot();
  ASSERT_FALSE(last.empty()) << message;
  EXPECT_NE(message.find("Iteration " + std::to_string(solver->iter())),
            string::npos)
      << message;
  EXPECT_NE(message.find(last), string::npos) << message;
  // The last good snapshot is intact and finite; nothing later was written.
  SolverState state;
  ReadProtoFromBinaryFile(last, &state);
  NetParameter weights;
  ReadProtoFromBinaryFile(state.learned_net(), &weights);
  Net<Dtype> check(test::SolverTestParam("").train_net_param());
  check.CopyTrainedLayersFrom(weights);
  for (const Blob<Dtype>* blob : check.learnable_params()) {
    EXPECT_TRUE(cpu_all_finite(blob->count(), blob->cpu_data()));
  }
  for (const auto& entry : fs::directory_iterator(this->dir_)) {
    const string name = entry.path().filename().string();
    EXPECT_EQ(name.find(".tmp."), string::npos) << name;
    if (name.find("_iter_") == string::npos) continue;
    const int it = std::stoi(name.substr(name.find("_iter_") + 6));
    EXPECT_LE(it, state.iter())
        << "snapshot " << name << " written after divergence";
  }
}

TYPED_TEST(SolverTest, NonFiniteLossNamesIterationWithoutSnapshot) {
  auto solver = this->Make("");
  solver->net()->blob_by_name("target")->mutable_cpu_data()[0] = NAN;
  try {
    solver->Step(1);
    FAIL() << "expected NumericError";
  } catch (const NumericError& e) {
    const string msg = e.what();
    EXPECT_NE(msg.find("Iteration 0"), string::npos) << msg;
    EXPECT_NE(msg.find("No snapshot"), string::npos) << msg;
  }
}

TYPED_TEST(SolverTest, UnwritableSnapshotPrefix) {
  const string missing_dir = this->dir_ + "/no/such/dir/snap";
  // Checked up front when snapshots are scheduled...
  EXPECT_THROW(
      this->Make(StrCat("snapshot: 10 snapshot_prefix: '", missing_dir, "'")),
      IOError);
  // ... and reported as IOError, leaving nothing, when written on demand.
  auto solver = this->Make(StrCat("snapshot_prefix: '", missing_dir, "'"));
  solver->Step(1);
  EXPECT_THROW(solver->Snapshot(), IOError);
  EXPECT_FALSE(FileExists(missing_dir + "_iter_1.caffemodel"));
  EXPECT_TRUE(solver->last_snapshot().empty());

  // A read-only directory (root ignores permissions, so only as a user).
  const string ro = this->dir_ + "/readonly";
  fs::create_directory(ro);
  fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
  if (::access(ro.c_str(), W_OK) == 0) {
    GTEST_LOG_(INFO) << "running as root: read-only directory not enforced";
  } else {
    auto ro_solver = this->Make(StrCat("snapshot_prefix: '", ro, "/s'"));
    ro_solver->Step(1);
    EXPECT_THROW(ro_solver->Snapshot(), IOError);
    EXPECT_TRUE(fs::is_empty(ro));
  }
}

// A write that fails midway (file size limit, as on a full disk) leaves the
// previous snapshot under the final name untouched and no temporary file.
TYPED_TEST(SolverTest, FailedSnapshotWriteKeepsPreviousFile) {
  auto solver = this->Make(StrCat("snapshot_prefix: '", this->Prefix(), "'"));
  solver->Step(1);
  solver->Snapshot();
  const string model = this->Prefix() + "_iter_1.caffemodel";
  const string before = ReadFileToString(model);
  ASSERT_GT(before.size(), 64u);
  // Same iteration, different weights: the rewrite would change the file.
  solver->net()->learnable_params()[0]->mutable_cpu_data()[0] += 1;

  struct rlimit old_limit;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  struct rlimit limit = old_limit;
  limit.rlim_cur = before.size() / 2;
  auto old_handler = signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  bool threw_io_error = false;
  try {
    solver->Snapshot();
  } catch (const IOError&) {
    threw_io_error = true;
  }
  setrlimit(RLIMIT_FSIZE, &old_limit);
  signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(threw_io_error);
  EXPECT_EQ(ReadFileToString(model), before);
  for (const auto& entry : fs::directory_iterator(this->dir_)) {
    EXPECT_EQ(entry.path().string().find(".tmp."), string::npos)
        << entry.path();
  }
}

}  // namespace
}  // namespace poseidon
