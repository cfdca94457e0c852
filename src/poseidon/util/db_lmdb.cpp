// The LMDB backend of util/db: environment setup, cursors, transactions that
// grow the memory map on demand, and the size checks that keep a truncated
// data file from ending the process with SIGBUS.
#include "poseidon/util/db.hpp"

#include <lmdb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace poseidon {
namespace db {
namespace {

// Throws IOError("<what> '<source>': <LMDB's reason>") unless rc is success.
void MdbRequire(int rc, const char* what, const string& source) {
  if (rc == MDB_SUCCESS) return;
  POSEIDON_THROW(IOError, what, " '", source, "': ", mdb_strerror(rc));
}

// Note [Truncated LMDB files]
// LMDB reads data.mdb through a memory map as large as the map size, not the
// file. A page past the end of a truncated file (a copy cut short, a full
// disk) is nothing LMDB can detect: touching it raises SIGBUS, which kills
// the process in mdb_cursor_get, often many iterations in. So the file is
// checked against what LMDB's newest meta page says is in use: data.mdb
// must hold every page up to me_last_pgno, (me_last_pgno + 1) * ms_psize
// bytes. Open refuses a short file with an IOError naming the database and
// both sizes. A file may also shrink while it is open, so every cursor move
// first fstat()s the data file (one system call, a fraction of a
// microsecond beside the record it reads) and throws the same error once
// it has become short. The alternative, a SIGBUS handler that siglongjmps
// out of LMDB, would also close the small window between that check and
// the read, but it takes over a process-wide signal (Python's handlers and
// other libraries' included) and jumps over LMDB's frames with its reader
// slot held; a file cut within that window still ends the process.

// The bytes data.mdb must hold: every page up to the last one in use.
size_t NeededBytes(MDB_env* env, const string& source) {
  MDB_envinfo info;
  MDB_stat stat;
  MdbRequire(mdb_env_info(env, &info), "cannot query LMDB", source);
  MdbRequire(mdb_env_stat(env, &stat), "cannot query LMDB", source);
  return (static_cast<size_t>(info.me_last_pgno) + 1) * stat.ms_psize;
}

// The descriptor of data.mdb.
int DataFd(MDB_env* env, const string& source) {
  mdb_filehandle_t fd;
  MdbRequire(mdb_env_get_fd(env, &fd), "cannot query LMDB", source);
  return fd;
}

// Throws IOError naming the database and both sizes unless data.mdb (open
// as `fd`) holds `needed` bytes. See Note [Truncated LMDB files].
void RequireWholeFile(int fd, size_t needed, const string& source,
                      bool while_open) {
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    POSEIDON_THROW(IOError, "cannot read LMDB '", source,
                   "': fstat of data.mdb: ", std::strerror(errno));
  }
  const size_t have = static_cast<size_t>(info.st_size);
  POSEIDON_REQUIRE(have >= needed, IOError, "LMDB '", source, "' ",
                   while_open ? "was truncated while open" : "is truncated",
                   ": its data.mdb holds ", have,
                   " bytes but the pages in use need ", needed,
                   " (a partial copy, or a full disk when it was written?); "
                   "copy or convert it again");
}

MDB_val ToVal(const string& s) {
  MDB_val v;
  v.mv_size = s.size();
  v.mv_data = const_cast<char*>(s.data());
  return v;
}

class LMDBCursor final : public Cursor {
 public:
  LMDBCursor(MDB_env* env, const string& source)
      : source_(source),
        fd_(DataFd(env, source)),
        needed_bytes_(NeededBytes(env, source)) {
    MdbRequire(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn_),
               "cannot start a read transaction on LMDB", source_);
    MDB_dbi dbi;
    int rc = mdb_dbi_open(txn_, nullptr, 0, &dbi);
    if (rc == MDB_SUCCESS) rc = mdb_cursor_open(txn_, dbi, &cursor_);
    if (rc != MDB_SUCCESS) {
      mdb_txn_abort(txn_);
      MdbRequire(rc, "cannot open a cursor on LMDB", source_);
    }
    SeekToFirst();
  }
  ~LMDBCursor() override {
    mdb_cursor_close(cursor_);
    mdb_txn_abort(txn_);
  }
  POSEIDON_DISABLE_COPY_AND_ASSIGN(LMDBCursor);

  void SeekToFirst() override { Seek(MDB_FIRST); }
  void Next() override {
    CHECK(valid_) << "Next() on an exhausted cursor of " << source_;
    Seek(MDB_NEXT);
  }
  string key() const override {
    CHECK(valid_);
    return string(static_cast<const char*>(key_.mv_data), key_.mv_size);
  }
  string value() const override {
    CHECK(valid_);
    return string(static_cast<const char*>(value_.mv_data), value_.mv_size);
  }
  bool valid() const override { return valid_; }

 private:
  void Seek(MDB_cursor_op op) {
    // The snapshot reads no page past the newest meta page's last one.
    RequireWholeFile(fd_, needed_bytes_, source_, /*while_open=*/true);
    const int rc = mdb_cursor_get(cursor_, &key_, &value_, op);
    if (rc == MDB_NOTFOUND) {
      valid_ = false;
      return;
    }
    MdbRequire(rc, "cannot read from LMDB", source_);
    valid_ = true;
  }

  string source_;
  int fd_;
  size_t needed_bytes_;
  MDB_txn* txn_ = nullptr;
  MDB_cursor* cursor_ = nullptr;
  MDB_val key_{0, nullptr};
  MDB_val value_{0, nullptr};
  bool valid_ = false;
};

// When the memory map is full, the map size is doubled and the write
// retried, so a database grows as needed without the caller choosing a size.
class LMDBTransaction final : public Transaction {
 public:
  LMDBTransaction(MDB_env* env, const string& source)
      : env_(env), source_(source) {}
  POSEIDON_DISABLE_COPY_AND_ASSIGN(LMDBTransaction);

  void Put(const string& key, const string& value) override {
    keys_.push_back(key);
    values_.push_back(value);
  }

  void Commit() override {
    // Each attempt writes every buffered record in one transaction; a full
    // map aborts the attempt (LMDB cannot resize inside a write
    // transaction).
    for (;;) {
      MDB_txn* txn = nullptr;
      MdbRequire(mdb_txn_begin(env_, nullptr, 0, &txn),
                 "cannot start a write transaction on LMDB", source_);
      MDB_dbi dbi;
      int rc = mdb_dbi_open(txn, nullptr, 0, &dbi);
      for (size_t i = 0; rc == MDB_SUCCESS && i < keys_.size(); ++i) {
        MDB_val k = ToVal(keys_[i]);
        MDB_val v = ToVal(values_[i]);
        rc = mdb_put(txn, dbi, &k, &v, 0);
      }
      if (rc == MDB_SUCCESS) {
        rc = mdb_txn_commit(txn);  // frees txn whatever the outcome
      } else {
        mdb_txn_abort(txn);
      }
      if (rc == MDB_MAP_FULL) {
        DoubleMapSize();
        continue;
      }
      MdbRequire(rc, "cannot write to LMDB", source_);
      break;
    }
    keys_.clear();
    values_.clear();
  }

 private:
  void DoubleMapSize() {
    MDB_envinfo info;
    MdbRequire(mdb_env_info(env_, &info), "cannot query LMDB", source_);
    const size_t new_size = info.me_mapsize * 2;
    LOG(INFO) << "LMDB " << source_ << ": map full, growing it to " << new_size
              << " bytes";
    MdbRequire(mdb_env_set_mapsize(env_, new_size), "cannot grow LMDB",
               source_);
  }

  MDB_env* env_;
  string source_;
  vector<string> keys_;
  vector<string> values_;
};

// One read-only environment per database directory and process: LMDB
// forbids opening a database twice in one process (closing one copy drops
// the other's locks).
struct SharedEnv {
  MDB_env* env = nullptr;
  ~SharedEnv() {
    if (env != nullptr) mdb_env_close(env);
  }
};

std::mutex g_env_mu;
std::map<string, std::weak_ptr<SharedEnv>>& OpenEnvs() {
  static auto* envs = new std::map<string, std::weak_ptr<SharedEnv>>;
  return *envs;
}

class LMDB final : public DB {
 public:
  LMDB() = default;
  ~LMDB() override { Close(); }
  POSEIDON_DISABLE_COPY_AND_ASSIGN(LMDB);

  void Open(const string& source, Mode mode) override;
  void Close() override;
  std::unique_ptr<Cursor> NewCursor() override {
    CHECK(env_) << "NewCursor() on a closed DB";
    return std::make_unique<LMDBCursor>(env_, source_);
  }
  std::unique_ptr<Transaction> NewTransaction() override {
    CHECK(env_) << "NewTransaction() on a closed DB";
    return std::make_unique<LMDBTransaction>(env_, source_);
  }
  size_t Size() const override {
    CHECK(env_) << "Size() on a closed DB";
    MDB_stat stat;
    MdbRequire(mdb_env_stat(env_, &stat), "cannot query LMDB", source_);
    return stat.ms_entries;
  }
  const char* name() const override { return "LMDB"; }
  const string& source() const override { return source_; }

 private:
  MDB_env* env_ = nullptr;
  std::shared_ptr<SharedEnv> shared_;  // READ mode only
  string source_;
};

void LMDB::Open(const string& source, Mode mode) {
  Close();
  if (mode == Mode::READ) {
    const string key = ResolvedPath(source);
    std::lock_guard<std::mutex> lock(g_env_mu);
    shared_ = OpenEnvs()[key].lock();
    if (!shared_) {
      auto fresh = std::make_shared<SharedEnv>();
      MdbRequire(mdb_env_create(&fresh->env), "cannot open LMDB", source);
      const int rc = mdb_env_open(fresh->env, source.c_str(),
                                  MDB_RDONLY | MDB_NOTLS, 0664);
      if (rc != MDB_SUCCESS) {
        mdb_env_close(fresh->env);
        fresh->env = nullptr;
        MdbRequire(rc, "cannot open LMDB", source);
      }
      OpenEnvs()[key] = fresh;
      shared_ = std::move(fresh);
    }
    env_ = shared_->env;
    source_ = source;
    try {
      RequireWholeFile(DataFd(env_, source), NeededBytes(env_, source), source,
                       /*while_open=*/false);
    } catch (const Error&) {
      shared_.reset();  // under g_env_mu, as Close() would take it
      env_ = nullptr;
      throw;
    }
    LOG(INFO) << "Opened LMDB " << source;
    return;
  }
  if (mode == Mode::NEW) {
    if (::mkdir(source.c_str(), 0755) != 0) {
      POSEIDON_THROW(
          IOError, "cannot create LMDB '", source, "': ",
          errno == EEXIST ? "the path already exists" : std::strerror(errno));
    }
  }
  MdbRequire(mdb_env_create(&env_), "cannot open LMDB", source);
  const int rc = mdb_env_open(env_, source.c_str(), 0, 0664);
  if (rc != MDB_SUCCESS) {
    mdb_env_close(env_);
    env_ = nullptr;
    MdbRequire(rc, "cannot open LMDB", source);
  }
  if (mode == Mode::WRITE) {
    try {
      RequireWholeFile(DataFd(env_, source), NeededBytes(env_, source), source,
                       /*while_open=*/false);
    } catch (const Error&) {
      mdb_env_close(env_);
      env_ = nullptr;
      throw;
    }
  }
  source_ = source;
  LOG(INFO) << "Opened LMDB " << source;
}

void LMDB::Close() {
  if (env_ == nullptr) return;
  if (shared_) {
    std::lock_guard<std::mutex> lock(g_env_mu);
    shared_.reset();  // the last reader closes the environment
  } else {
    mdb_env_close(env_);
  }
  env_ = nullptr;
}

}  // namespace

std::unique_ptr<DB> NewLMDB() { return std::make_unique<LMDB>(); }

void RemoveLMDB(const string& source) {
  ::unlink((source + "/data.mdb").c_str());
  ::unlink((source + "/lock.mdb").c_str());
  ::rmdir(source.c_str());
}

}  // namespace db
}  // namespace poseidon
