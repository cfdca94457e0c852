// HDF5 files for the HDF5Data and HDF5Output layers (USE_HDF5 builds only:
// the implementation is hdf5.cpp, over the HDF5 C library and its H5LT
// high-level part). A file holds named n-D datasets of numbers; this reads
// any integer or floating-point dataset converted to float/double, and
// writes float/double datasets in the element type of the data given.
//
// Errors: a missing, unreadable or non-HDF5 file, a missing dataset or one
// that does not hold numbers throw IOError naming the file and the dataset.
// HDF5's own error printing is silenced while these functions run, so the
// exception is the whole report.
//
// Thread safety: every call takes one process-wide lock (the high-level H5LT
// API is not thread-safe even where the C library is), so files may be used
// from several worker threads; one Hdf5File object is not shared.
#ifndef POSEIDON_UTIL_HDF5_HPP_
#define POSEIDON_UTIL_HDF5_HPP_

#include <cstdint>
#include <string>
#include <vector>

#include "poseidon/common.hpp"

namespace poseidon {

class Hdf5File {
 public:
  // Opens an existing file read-only.
  static Hdf5File OpenForRead(const string& filename);
  // Creates the file, replacing (truncating) one that exists.
  static Hdf5File Create(const string& filename);
  // Creates TemporaryFileFor(filename) instead; Close() commits it over
  // `filename` (Note [Atomic writes] in util/io.cpp), so that a process
  // killed while writing (a snapshot) leaves nothing under that name. Closed
  // by the destructor instead, the temporary file is removed.
  static Hdf5File CreateAtomically(const string& filename);

  Hdf5File(Hdf5File&& other) noexcept;
  Hdf5File& operator=(Hdf5File&& other) noexcept;
  ~Hdf5File();
  POSEIDON_DISABLE_COPY_AND_ASSIGN(Hdf5File);

  const string& filename() const { return filename_; }
  // Groups ("a/b/c" paths from the root). CreateGroup makes missing parents
  // too and leaves an existing group alone; IOError if it cannot.
  void CreateGroup(const string& path);
  bool HasGroup(const string& path) const;
  // Names of the links (datasets and groups) directly inside a group.
  vector<string> ChildNames(const string& group) const;
  bool HasDataset(const string& name) const;
  // The dataset's dimensions (at least one). Throws IOError when it is
  // missing, holds no numbers (strings, compounds...) or is a scalar.
  vector<int> DatasetShape(const string& name) const;
  // Reads the whole dataset converted to Dtype into `data`, which must hold
  // exactly its element count (else IOError).
  template <typename Dtype>
  void ReadDataset(const string& name, size_t count, Dtype* data) const;
  // Creates a dataset of the given shape stored as Dtype (float or double).
  // Throws IOError if it cannot (for example, the name is taken).
  template <typename Dtype>
  void WriteDataset(const string& name, const vector<int>& shape,
                    const Dtype* data);
  // Scalar datasets of one int or one string, as Caffe's HDF5 solver states
  // hold "iter", "current_step" and "learned_net". The readers throw IOError
  // naming the dataset when it is missing or of another kind.
  void WriteInt(const string& name, int value);
  int ReadInt(const string& name) const;
  void WriteString(const string& name, const string& value);
  string ReadString(const string& name) const;
  // Flushes and closes (and commits a file from CreateAtomically); throws
  // IOError if that fails. Idempotent; the destructor closes quietly.
  void Close();

 private:
  Hdf5File(int64_t id, string filename) : id_(id), filename_(filename) {}
  string Where(const string& dataset) const;

  int64_t id_ = -1;  // the hid_t, negative when closed
  string filename_;
  string temporary_;  // CreateAtomically: the file being written
};

}  // namespace poseidon

#endif  // POSEIDON_UTIL_HDF5_HPP_
