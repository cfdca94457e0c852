// HDF5 file access over the C library (see util/hdf5.hpp).
#include "poseidon/util/hdf5.hpp"

#include <hdf5.h>
#include <hdf5_hl.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <utility>

#include "poseidon/util/io.hpp"

namespace poseidon {

static_assert(std::is_same<hid_t, int64_t>::value,
              "Hdf5File stores the hid_t as int64_t");

namespace {

std::mutex& Hdf5Mutex() {
  static std::mutex mutex;
  return mutex;
}

// Holds the process-wide lock and silences HDF5's error printing (which
// would go to stderr beside our exception) for the lifetime of one call.
class Hdf5Call {
 public:
  Hdf5Call() : lock_(Hdf5Mutex()) {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~Hdf5Call() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }
  POSEIDON_DISABLE_COPY_AND_ASSIGN(Hdf5Call);

 private:
  std::lock_guard<std::mutex> lock_;
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// Closes an HDF5 object id when it goes out of scope.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  POSEIDON_DISABLE_COPY_AND_ASSIGN(Handle);
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

template <typename Dtype>
hid_t NativeType();
template <>
hid_t NativeType<float>() {
  return H5T_NATIVE_FLOAT;
}
template <>
hid_t NativeType<double>() {
  return H5T_NATIVE_DOUBLE;
}

const char* ClassName(H5T_class_t type_class) {
  switch (type_class) {
    case H5T_STRING:
      return "string";
    case H5T_COMPOUND:
      return "compound";
    case H5T_ENUM:
      return "enum";
    case H5T_BITFIELD:
      return "bitfield";
    case H5T_OPAQUE:
      return "opaque";
    case H5T_REFERENCE:
      return "reference";
    case H5T_VLEN:
      return "variable-length";
    case H5T_ARRAY:
      return "array";
    case H5T_TIME:
      return "time";
    default:
      return "unknown";
  }
}

}  // namespace

Hdf5File Hdf5File::OpenForRead(const string& filename) {
  POSEIDON_REQUIRE(FileExists(filename), IOError, "HDF5 file '", filename,
                   "' does not exist");
  Hdf5Call call;
  POSEIDON_REQUIRE(H5Fis_hdf5(filename.c_str()) > 0, IOError, "'", filename,
                   "' is not an HDF5 file");
  const hid_t id = H5Fopen(filename.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  POSEIDON_REQUIRE(id >= 0, IOError, "cannot open HDF5 file '", filename, "'");
  return Hdf5File(id, filename);
}

Hdf5File Hdf5File::Create(const string& filename) {
  Hdf5Call call;
  const hid_t id =
      H5Fcreate(filename.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  POSEIDON_REQUIRE(id >= 0, IOError, "cannot create HDF5 file '", filename,
                   "' (is its directory there and writable?)");
  return Hdf5File(id, filename);
}

Hdf5File Hdf5File::CreateAtomically(const string& filename) {
  const string tmp = TemporaryFileFor(filename);
  Hdf5File file = Create(tmp);
  file.filename_ = filename;
  file.temporary_ = tmp;
  return file;
}

Hdf5File::Hdf5File(Hdf5File&& other) noexcept
    : id_(std::exchange(other.id_, -1)),
      filename_(std::move(other.filename_)),
      temporary_(std::move(other.temporary_)) {}

Hdf5File& Hdf5File::operator=(Hdf5File&& other) noexcept {
  if (this != &other) {
    if (id_ >= 0) {
      Hdf5Call call;
      H5Fclose(id_);
      if (!temporary_.empty()) std::remove(temporary_.c_str());
    }
    id_ = std::exchange(other.id_, -1);
    filename_ = std::move(other.filename_);
    temporary_ = std::move(other.temporary_);
  }
  return *this;
}

Hdf5File::~Hdf5File() {
  if (id_ >= 0) {
    Hdf5Call call;
    H5Fclose(id_);
    // Not committed: an error came first.
    if (!temporary_.empty()) std::remove(temporary_.c_str());
  }
}

void Hdf5File::Close() {
  if (id_ < 0) return;
  herr_t status;
  {
    Hdf5Call call;
    status = H5Fclose(id_);
  }
  id_ = -1;
  if (status < 0 && !temporary_.empty()) std::remove(temporary_.c_str());
  POSEIDON_REQUIRE(status >= 0, IOError, "cannot write HDF5 file '", filename_,
                   "'");
  if (!temporary_.empty()) {
    const string tmp = std::exchange(temporary_, string());
    CommitFileAtomically(tmp, filename_);
  }
}

string Hdf5File::Where(const string& dataset) const {
  return StrCat("HDF5 file '", filename_, "' dataset '", dataset, "'");
}

namespace {

// Whether `path` names a group: every prefix ("a", "a/b", ...) must exist
// first, since H5Lexists fails, rather than saying no, when a parent on the
// path is missing. Called with the HDF5 lock held.
bool IsGroup(hid_t file, const string& path) {
  for (size_t slash = path.find('/'); slash != string::npos;
       slash = path.find('/', slash + 1)) {
    if (H5Lexists(file, path.substr(0, slash).c_str(), H5P_DEFAULT) <= 0) {
      return false;
    }
  }
  if (H5Lexists(file, path.c_str(), H5P_DEFAULT) <= 0) return false;
  const Handle group(H5Gopen2(file, path.c_str(), H5P_DEFAULT), H5Gclose);
  return group.ok();
}

}  // namespace

void Hdf5File::CreateGroup(const string& path) {
  CHECK_GE(id_, 0) << "HDF5 file '" << filename_ << "' is closed";
  Hdf5Call call;
  if (IsGroup(id_, path)) return;
  const Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  const Handle group(
      H5Gcreate2(id_, path.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
      H5Gclose);
  POSEIDON_REQUIRE(group.ok(), IOError, "cannot create group '", path,
                   "' in HDF5 file '", filename_, "'");
}

bool Hdf5File::HasGroup(const string& path) const {
  CHECK_GE(id_, 0) << "HDF5 file '" << filename_ << "' is closed";
  Hdf5Call call;
  return IsGroup(id_, path);
}

vector<string> Hdf5File::ChildNames(const string& group) const {
  CHECK_GE(id_, 0) << "HDF5 file '" << filename_ << "' is closed";
  Hdf5Call call;
  const Handle g(H5Gopen2(id_, group.c_str(), H5P_DEFAULT), H5Gclose);
  POSEIDON_REQUIRE(g.ok(), IOError, "HDF5 file '", filename_,
                   "' has no group '", group, "'");
  H5G_info_t info;
  POSEIDON_REQUIRE(H5Gget_info(g.get(), &info) >= 0, IOError,
                   "cannot list group '", group, "' of HDF5 file '", filename_,
                   "'");
  vector<string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t size = H5Lget_name_by_idx(
        g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    POSEIDON_REQUIRE(size >= 0, IOError, "cannot list group '", group,
                     "' of HDF5 file '", filename_, "'");
    string name(static_cast<size_t>(size) + 1, '\0');
    H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, &name[0],
                       name.size(), H5P_DEFAULT);
    name.resize(static_cast<size_t>(size));
    names.push_back(name);
  }
  return names;
}

bool Hdf5File::HasDataset(const string& name) const {
  CHECK_GE(id_, 0) << "HDF5 file '" << filename_ << "' is closed";
  Hdf5Call call;
  // H5Lexists fails (negative) when a group on the path is missing.
  if (H5Lexists(id_, name.c_str(), H5P_DEFAULT) <= 0) return false;
  const Handle dataset(H5Dopen2(id_, name.c_str(), H5P_DEFAULT), H5Dclose);
  return dataset.ok();
}

vector<int> Hdf5File::DatasetShape(const string& name) const {
  POSEIDON_REQUIRE(HasDataset(name), IOError, Where(name), " is missing");
  Hdf5Call call;
  const Handle dataset(H5Dopen2(id_, name.c_str(), H5P_DEFAULT), H5Dclose);
  const Handle type(H5Dget_type(dataset.get()), H5Tclose);
  const Handle space(H5Dget_space(dataset.get()), H5Sclose);
  POSEIDON_REQUIRE(type.ok() && space.ok(), IOError, "cannot read ",
                   Where(name));
  const H5T_class_t type_class = H5Tget_class(type.get());
  POSEIDON_REQUIRE(type_class == H5T_INTEGER || type_class == H5T_FLOAT,
                   IOError, Where(name), " holds ", ClassName(type_class),
                   " values; need integer or floating-point numbers");
  const int rank = H5Sget_simple_extent_ndims(space.get());
  POSEIDON_REQUIRE(rank >= 1, IOError, Where(name),
                   " has no dimensions; need at least one (the sample axis)");
  vector<hsize_t> dims(rank);
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  vector<int> shape;
  for (hsize_t dim : dims) {
    POSEIDON_REQUIRE(dim <= static_cast<hsize_t>(INT_MAX), IOError, Where(name),
                     " has a dimension of ", dim,
                     ", more than Poseidon's blobs hold");
    shape.push_back(static_cast<int>(dim));
  }
  return shape;
}

template <typename Dtype>
void Hdf5File::ReadDataset(const string& name, size_t count,
                           Dtype* data) const {
  POSEIDON_REQUIRE(HasDataset(name), IOError, Where(name), " is missing");
  Hdf5Call call;
  const Handle dataset(H5Dopen2(id_, name.c_str(), H5P_DEFAULT), H5Dclose);
  const Handle space(H5Dget_space(dataset.get()), H5Sclose);
  POSEIDON_REQUIRE(space.ok(), IOError, "cannot read ", Where(name));
  const hssize_t points = H5Sget_simple_extent_npoints(space.get());
  POSEIDON_REQUIRE(points == static_cast<hssize_t>(count), IOError, Where(name),
                   " holds ", points, " values, expected ", count);
  const herr_t status = H5Dread(dataset.get(), NativeType<Dtype>(), H5S_ALL,
                                H5S_ALL, H5P_DEFAULT, data);
  POSEIDON_REQUIRE(status >= 0, IOError, "cannot read ", Where(name),
                   " as numbers");
}

template <typename Dtype>
void Hdf5File::WriteDataset(const string& name, const vector<int>& shape,
                            const Dtype* data) {
  CHECK_GE(id_, 0) << "HDF5 file '" << filename_ << "' is closed";
  CHECK(!shape.empty()) << "writing a scalar dataset " << Where(name);
  const vector<hsize_t> dims(shape.begin(), shape.end());
  Hdf5Call call;
  const herr_t status =
      H5LTmake_dataset(id_, name.c_str(), static_cast<int>(dims.size()),
                       dims.data(), NativeType<Dtype>(), data);
  POSEIDON_REQUIRE(status >= 0, IOError, "cannot write ", Where(name));
}

void Hdf5File::WriteInt(const string& name, int value) {
  CHECK_GE(id_, 0) << "HDF5 file '" << filename_ << "' is closed";
  Hdf5Call call;
  // Rank 0: a scalar, as Caffe's hdf5_save_int writes it.
  POSEIDON_REQUIRE(
      H5LTmake_dataset_int(id_, name.c_str(), 0, nullptr, &value) >= 0, IOError,
      "cannot write ", Where(name));
}

int Hdf5File::ReadInt(const string& name) const {
  CHECK_GE(id_, 0) << "HDF5 file '" << filename_ << "' is closed";
  Hdf5Call call;
  POSEIDON_REQUIRE(H5LTfind_dataset(id_, name.c_str()) > 0, IOError,
                   Where(name), " does not exist");
  int rank = -1;
  POSEIDON_REQUIRE(
      H5LTget_dataset_ndims(id_, name.c_str(), &rank) >= 0 && rank <= 1,
      IOError, Where(name), " is not a single integer");
  H5T_class_t type_class;
  size_t type_size = 0;
  hsize_t dims[1] = {1};
  POSEIDON_REQUIRE(
      H5LTget_dataset_info(id_, name.c_str(), rank ? dims : nullptr,
                           &type_class, &type_size) >= 0 &&
          type_class == H5T_INTEGER && dims[0] == 1,
      IOError, Where(name), " is not a single integer");
  int value = 0;
  POSEIDON_REQUIRE(H5LTread_dataset_int(id_, name.c_str(), &value) >= 0,
                   IOError, "cannot read ", Where(name));
  return value;
}

void Hdf5File::WriteString(const string& name, const string& value) {
  CHECK_GE(id_, 0) << "HDF5 file '" << filename_ << "' is closed";
  Hdf5Call call;
  POSEIDON_REQUIRE(
      H5LTmake_dataset_string(id_, name.c_str(), value.c_str()) >= 0, IOError,
      "cannot write ", Where(name));
}

string Hdf5File::ReadString(const string& name) const {
  CHECK_GE(id_, 0) << "HDF5 file '" << filename_ << "' is closed";
  Hdf5Call call;
  POSEIDON_REQUIRE(H5LTfind_dataset(id_, name.c_str()) > 0, IOError,
                   Where(name), " does not exist");
  H5T_class_t type_class;
  size_t size = 0;
  POSEIDON_REQUIRE(H5LTget_dataset_info(id_, name.c_str(), nullptr, &type_class,
                                        &size) >= 0 &&
                       type_class == H5T_STRING,
                   IOError, Where(name), " is not a string");
  // A fixed-length string of `size` bytes, NUL-terminated or padded.
  string value(size + 1, '\0');
  POSEIDON_REQUIRE(H5LTread_dataset_string(id_, name.c_str(), &value[0]) >= 0,
                   IOError, "cannot read ", Where(name));
  value.resize(std::strlen(value.c_str()));
  return value;
}

template void Hdf5File::ReadDataset<float>(const string&, size_t, float*) const;
template void Hdf5File::ReadDataset<double>(const string&, size_t,
                                            double*) const;
template void Hdf5File::WriteDataset<float>(const string&, const vector<int>&,
                                            const float*);
template void Hdf5File::WriteDataset<double>(const string&, const vector<int>&,
                                             const double*);

}  // namespace poseidon
