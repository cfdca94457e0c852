// The LevelDB backend of util/db: one shared leveldb::DB per directory for
// the readers of a process, snapshot cursors, and write batches.
#include "poseidon/util/db.hpp"

#include <leveldb/db.h>
#include <leveldb/iterator.h>
#include <leveldb/options.h>
#include <leveldb/write_batch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

namespace poseidon {
namespace db {
namespace {

// Note [LevelDB locks]
// leveldb::DB::Open locks <dir>/LOCK (an fcntl lock) until the DB is
// closed, and also records the path, as spelled, in a table of the process:
//  - a second Open of the directory in the same process fails ("lock
//    <dir>/LOCK: already held by process"), read-only or not. BVLC Caffe
//    opens a DB per Data layer, so it fails when two layers read one LevelDB:
//    a TRAIN and a TEST net over one source (BVLC/caffe#922, #3037), or the
//    solvers of several GPUs (#6204). Spelled differently ("./db" and "db")
//    the second Open succeeds, and two leveldb::DB then write one directory.
//  - an Open from another process fails ("Resource temporarily
//    unavailable") for as long as one process has it open (#343, #2131).
// LevelDB has no read-only mode: even a reader writes in the directory (the
// LOCK and LOG files, a new MANIFEST, and its write-ahead log turned into a
// table), so the directory must be writable.
//
// Poseidon therefore opens each LevelDB once per process: READ opens of one
// resolved path share one leveldb::DB (reference counted; the last reader
// closes it), which is safe for concurrent use, and each cursor has its own
// iterator. A WRITE or NEW open of a path the process has open, or a READ of
// one it has open for writing, is an IOError rather than a second handle.
// Across processes LevelDB's limit stays, and its lock error carries a hint
// (LMDB, or one part per process with scripts/partition_data).

// An open leveldb::DB, shared by the DB objects that opened it. Its
// reference count changes only under g_handles_mu, so a handle is never
// closing while another Open looks for it.
struct Handle {
  std::unique_ptr<leveldb::DB> db;
  bool writable = false;
};

std::mutex g_handles_mu;
// Resolved path -> the handle open on it in this process, if any.
std::map<string, std::weak_ptr<Handle>>& OpenHandles() {
  static auto* handles = new std::map<string, std::weak_ptr<Handle>>;
  return *handles;
}


// The options BVLC Caffe opens a LevelDB with (db_leveldb.cpp): 64 KiB
// blocks, a 256 MiB write buffer, at most 100 open files; the rest are
// LevelDB's defaults (snappy compression, an 8 MiB block cache).
leveldb::Options CaffeOptions() {
  leveldb::Options options;
  options.block_size = 65536;
  options.write_buffer_size = 268435456;
  options.max_open_files = 100;
  return options;
}

// Reads verify block checksums, so a damaged table is an error, not garbage
// records; a pass over the database does not fill the block cache.
leveldb::ReadOptions ScanOptions() {
  leveldb::ReadOptions options;
  options.verify_checksums = true;
  options.fill_cache = false;
  return options;
}

// Throws IOError("<what> '<source>': <LevelDB's status>"), with a hint for
// the two failures that surprise Caffe users. See Note [LevelDB locks].
[[noreturn]] void ThrowStatus(const char* what, const string& source,
                              const leveldb::Status& status) {
  const string text = status.ToString();
  auto has = [&text](const char* s) { return text.find(s) != string::npos; };
  string hint;
  if (has("LOCK") && (has("temporarily unavailable") || has("held"))) {
    hint =
        " (LevelDB lets one process at a time open a database, and another "
        "process has it open. The layers and threads of one Poseidon process "
        "share one opening; for several processes, convert the data with "
        "--backend=lmdb, which any number of processes can read, or give "
        "each process its own part with scripts/partition_data)";
  } else if (has("Permission denied") || has("Read-only file system")) {
    hint =
        " (LevelDB writes in a database's directory even to read it: its "
        "LOCK, LOG and MANIFEST files; make the directory writable, or "
        "convert the data with --backend=lmdb)";
  }
  POSEIDON_THROW(IOError, what, " '", source, "': ", text, hint);
}

class LevelDBCursor final : public Cursor {
 public:
  LevelDBCursor(leveldb::DB* db, const string& source)
      : source_(source),
        // Without ReadOptions::snapshot the iterator reads the implicit
        // snapshot of the moment it is created, for as long as it lives.
        iter_(db->NewIterator(ScanOptions())) {
    SeekToFirst();
  }
  POSEIDON_DISABLE_COPY_AND_ASSIGN(LevelDBCursor);

  void SeekToFirst() override {
    iter_->SeekToFirst();
    CheckStatus();
  }
  void Next() override {
    CHECK(iter_->Valid()) << "Next() on an exhausted cursor of " << source_;
    iter_->Next();
    CheckStatus();
  }
  string key() const override {
    CHECK(iter_->Valid());
    return iter_->key().ToString();
  }
  string value() const override {
    CHECK(iter_->Valid());
    return iter_->value().ToString();
  }
  bool valid() const override { return iter_->Valid(); }

 private:
  // Checked after every move, not only when the iterator stops: LevelDB's
  // iterator steps over a block it cannot read (a bad checksum, a table
  // cut short) to the next one and stays valid, keeping the error in its
  // status, so a damaged table would otherwise lose records silently until
  // the end of the pass. status() looks at the iterators' saved errors; it
  // reads nothing.
  void CheckStatus() const {
    const leveldb::Status status = iter_->status();
    if (!status.ok()) ThrowStatus("cannot read from LevelDB", source_, status);
  }

  string source_;
  std::unique_ptr<leveldb::Iterator> iter_;
};

// Caffe writes its batches with LevelDB's default WriteOptions (no sync per
// write); so does this. LevelDB::Close() syncs a database that was written.
class LevelDBTransaction final : public Transaction {
 public:
  LevelDBTransaction(leveldb::DB* db, const string& source)
      : db_(db), source_(source) {}
  POSEIDON_DISABLE_COPY_AND_ASSIGN(LevelDBTransaction);

  void Put(const string& key, const string& value) override {
    batch_.Put(key, value);
  }
  void Commit() override {
    const leveldb::Status status = db_->Write(leveldb::WriteOptions(), &batch_);
    if (!status.ok()) ThrowStatus("cannot write to LevelDB", source_, status);
    batch_.Clear();
  }

 private:
  leveldb::DB* db_;
  string source_;
  leveldb::WriteBatch batch_;
};

class LevelDB final : public DB {
 public:
  LevelDB() = default;
  ~LevelDB() override { Close(); }
  POSEIDON_DISABLE_COPY_AND_ASSIGN(LevelDB);

  void Open(const string& source, Mode mode) override;
  void Close() override;
  std::unique_ptr<Cursor> NewCursor() override {
    CHECK(handle_) << "NewCursor() on a closed DB";
    return std::make_unique<LevelDBCursor>(handle_->db.get(), source_);
  }
  std::unique_ptr<Transaction> NewTransaction() override {
    CHECK(handle_) << "NewTransaction() on a closed DB";
    POSEIDON_REQUIRE(handle_->writable, IOError, "cannot write to LevelDB '",
                     source_, "': it was opened READ");
    return std::make_unique<LevelDBTransaction>(handle_->db.get(), source_);
  }
  size_t Size() const override;
  const char* name() const override { return "LevelDB"; }
  const string& source() const override { return source_; }

 private:
  std::shared_ptr<Handle> handle_;  // reset only under g_handles_mu
  string source_;
};

void LevelDB::Open(const string& source, Mode mode) {
  Close();
  std::lock_guard<std::mutex> lock(g_handles_mu);
  if (mode == Mode::NEW) {
    // A directory this process has open exists, so this fails for it too.
    if (::mkdir(source.c_str(), 0755) != 0) {
      POSEIDON_THROW(
          IOError, "cannot create LevelDB '", source, "': ",
          errno == EEXIST ? "the path already exists" : std::strerror(errno));
    }
  }
  std::weak_ptr<Handle>& slot = OpenHandles()[ResolvedPath(source)];
  if (std::shared_ptr<Handle> open = slot.lock()) {
    // See Note [LevelDB locks].
    POSEIDON_REQUIRE(mode == Mode::READ && !open->writable, IOError,
                     "cannot open LevelDB '", source, "'",
                     mode == Mode::READ ? "" : " for writing",
                     ": this process has it open for ",
                     open->writable ? "writing" : "reading",
                     " (LevelDB allows one opening per process; close it "
                     "first)");
    handle_ = std::move(open);
    source_ = source;
    LOG(INFO) << "Opened LevelDB " << source << " (shared)";
    return;
  }
  if (mode != Mode::NEW) {
    // LevelDB would create the directory, or its LOCK and LOG files in a
    // directory of something else, before finding no database there.
    POSEIDON_REQUIRE(PathExists(source), IOError, "cannot open LevelDB '",
                     source, "': ", std::strerror(ENOENT));
    POSEIDON_REQUIRE(PathExists(source + "/CURRENT"), IOError,
                     "cannot open LevelDB '", source,
                     "': it holds no LevelDB database (no CURRENT file)",
                     PathExists(source + "/data.mdb")
                         ? "; it is an LMDB (data.mdb): read it with "
                           "backend LMDB"
                         : "");
  }
  leveldb::Options options = CaffeOptions();
  options.create_if_missing = mode == Mode::NEW;
  options.error_if_exists = mode == Mode::NEW;
  leveldb::DB* db = nullptr;
  const leveldb::Status status = leveldb::DB::Open(options, source, &db);
  if (!status.ok()) {
    if (mode == Mode::NEW) RemoveLevelDB(source);
    ThrowStatus("cannot open LevelDB", source, status);
  }
  handle_ = std::make_shared<Handle>();
  handle_->db.reset(db);
  handle_->writable = mode != Mode::READ;
  slot = handle_;
  source_ = source;
  LOG(INFO) << "Opened LevelDB " << source;
}

void LevelDB::Close() {
  if (!handle_) return;
  if (handle_->writable) {
    // An empty batch written with sync flushes the write-ahead log, and
    // with it every record committed before.
    leveldb::WriteOptions sync;
    sync.sync = true;
    leveldb::WriteBatch empty;
    const leveldb::Status status = handle_->db->Write(sync, &empty);
    LOG_IF(ERROR, !status.ok())
        << "LevelDB " << source_ << ": cannot sync: " << status.ToString();
  }
  std::lock_guard<std::mutex> lock(g_handles_mu);
  handle_.reset();  // the last user closes the leveldb::DB
}

size_t LevelDB::Size() const {
  CHECK(handle_) << "Size() on a closed DB";
  LevelDBCursor cursor(handle_->db.get(), source_);
  size_t count = 0;
  for (; cursor.valid(); cursor.Next()) ++count;
  return count;
}

}  // namespace

std::unique_ptr<DB> NewLevelDB() { return std::make_unique<LevelDB>(); }

void RemoveLevelDB(const string& source) {
  const leveldb::Status status = leveldb::DestroyDB(source, leveldb::Options());
  LOG_IF(WARNING, !status.ok())
      << "cannot remove LevelDB " << source << ": " << status.ToString();
  ::rmdir(source.c_str());
}

}  // namespace db
}  // namespace poseidon
