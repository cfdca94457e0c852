// The backend-independent part of util/db: choosing a backend by name or by
// what a directory holds, the Writer of the convert_* tools, record keys.
#include "poseidon/util/db.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <system_error>

namespace poseidon {
namespace db {
namespace {

// The file that marks a database of each backend.
const char* MarkerFile(DataParameter::DB backend) {
  return backend == DataParameter::LMDB ? "data.mdb" : "CURRENT";
}

string ShownName(DataParameter::DB backend) {
  return backend == DataParameter::LMDB ? "LMDB" : "LEVELDB";
}

}  // namespace

bool PathExists(const string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

string ResolvedPath(const string& source) {
  std::error_code ec;
  string resolved = std::filesystem::weakly_canonical(source, ec).string();
  if (ec) resolved = source;
  while (resolved.size() > 1 && resolved.back() == '/') resolved.pop_back();
  return resolved;
}

DataParameter::DB ParseBackend(const string& backend) {
  string lower = backend;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (lower == "lmdb") return DataParameter::LMDB;
  if (lower == "leveldb") return DataParameter::LEVELDB;
  POSEIDON_THROW(ConfigError, "unknown database backend '", backend,
                 "': use lmdb or leveldb");
}

string BackendName(DataParameter::DB backend) {
  return backend == DataParameter::LMDB ? "lmdb" : "leveldb";
}

std::unique_ptr<DB> GetDB(DataParameter::DB backend) {
  switch (backend) {
    case DataParameter::LMDB:
      return NewLMDB();
    case DataParameter::LEVELDB:
      return NewLevelDB();
  }
  POSEIDON_THROW(ConfigError, "unknown database backend ",
                 static_cast<int>(backend), ": use LMDB or LEVELDB");
}

std::unique_ptr<DB> GetDB(const string& backend) {
  return GetDB(ParseBackend(backend));
}

std::optional<DataParameter::DB> DetectBackend(const string& source) {
  const bool lmdb = PathExists(source + "/" + MarkerFile(DataParameter::LMDB));
  const bool leveldb =
      PathExists(source + "/" + MarkerFile(DataParameter::LEVELDB));
  if (lmdb == leveldb) return std::nullopt;
  return lmdb ? DataParameter::LMDB : DataParameter::LEVELDB;
}

// Note [Choosing a backend]
// Caffe opens a database with the backend it is told (DataParameter.backend,
// whose default is LEVELDB; the tools' --backend, default lmdb) and fails if
// the directory holds the other kind. The two kinds are told apart by their
// files without doubt (LMDB: data.mdb; LevelDB: CURRENT), so Poseidon reads
// what is there: a prototxt written for one backend keeps working when the
// data was converted to the other, and an unset backend needs no guess.
// Reading the other kind has no risk of misreading records, so a mismatch is
// a warning naming both backends, not an error. Only when the directory shows
// neither (it is missing, empty, or holds something else) does the asked-for
// backend, or the caller's default, decide, and the open then fails naming
// that backend and the path.
DataParameter::DB ChooseReadBackend(const string& source,
                                    std::optional<DataParameter::DB> requested,
                                    DataParameter::DB fallback,
                                    const string& who) {
  const std::optional<DataParameter::DB> found = DetectBackend(source);
  if (!found) return requested.value_or(fallback);
  if (requested && *requested != *found) {
    LOG(WARNING) << who << ": backend " << ShownName(*requested)
                 << " was asked for, but '" << source << "' holds a "
                 << ShownName(*found) << " database (it has "
                 << MarkerFile(*found) << "); reading it as "
                 << ShownName(*found);
  }
  return *found;
}

Writer::Writer(const string& backend, const string& source, int commit_every)
    : backend_(ParseBackend(backend)),
      db_(GetDB(backend_)),
      source_(source),
      commit_every_(commit_every) {
  CHECK_GT(commit_every, 0);
  db_->Open(source, Mode::NEW);
  txn_ = db_->NewTransaction();
}

Writer::~Writer() {
  if (finished_) return;
  txn_.reset();
  db_->Close();
  LOG(WARNING) << "Removing the incomplete database " << source_;
  RemoveDB(backend_, source_);
}

void Writer::Put(const string& key, const string& value) {
  CHECK(!finished_) << "Put() after Finish()";
  txn_->Put(key, value);
  if (++count_ % commit_every_ == 0) {
    txn_->Commit();
    LOG(INFO) << "Wrote " << count_ << " records to " << source_;
  }
}

void Writer::Finish() {
  CHECK(!finished_) << "Finish() twice";
  txn_->Commit();
  txn_.reset();
  db_->Close();
  finished_ = true;
  LOG(INFO) << "Wrote " << count_ << " records to " << source_ << " ("
            << db_->name() << ")";
}

void RemoveDB(DataParameter::DB backend, const string& source) {
  if (backend == DataParameter::LMDB) {
    RemoveLMDB(source);
  } else {
    RemoveLevelDB(source);
  }
}

string IndexKey(int index) {
  char key[32];
  std::snprintf(key, sizeof(key), "%08d", index);
  return key;
}

}  // namespace db
}  // namespace poseidon
