// A small key/value database interface over LMDB, the store that the Data
// layer reads and the convert_* tools write. Keys are kept sorted, so a
// cursor visits records in key order (the tools write zero-padded indices, so
// key order is insertion order).
//
// Ownership: NewCursor() and NewTransaction() return objects that observe the
// DB; they must be destroyed before the DB is closed.
//
// Thread safety: a DB opened READ uses MDB_RDONLY | MDB_NOTLS, so several
// readers (processes or threads) may share one database, and a cursor may be
// created on one thread and used on another, but each cursor is used by one
// thread at a time. One writer at a time per database.
#ifndef POSEIDON_UTIL_DB_HPP_
#define POSEIDON_UTIL_DB_HPP_

#include <lmdb.h>

#include <memory>
#include <string>
#include <vector>

#include "poseidon/common.hpp"
#include "poseidon/proto/caffe.pb.h"

namespace poseidon {
namespace db {

// READ: an existing database, read-only. WRITE: an existing database, to add
// or overwrite records. NEW: create the directory and a fresh database;
// fails if the path already exists (so nothing is overwritten by accident).
enum class Mode { READ, WRITE, NEW };

// Iterates over the records in key order from a read-only snapshot taken
// when the cursor was created.
class Cursor {
 public:
  Cursor(MDB_env* env, const string& source);
  ~Cursor();
  POSEIDON_DISABLE_COPY_AND_ASSIGN(Cursor);

  void SeekToFirst();
  void Next();
  // Valid only while valid() is true.
  string key() const;
  string value() const;
  bool valid() const { return valid_; }

 private:
  void Seek(MDB_cursor_op op);

  string source_;
  MDB_txn* txn_ = nullptr;
  MDB_cursor* cursor_ = nullptr;
  MDB_val key_{0, nullptr};
  MDB_val value_{0, nullptr};
  bool valid_ = false;
};

// Buffers Put()s and writes them in one LMDB transaction on Commit(). When
// the memory map is full, the map size is doubled and the write retried, so
// a database grows as needed without the caller choosing a size.
class Transaction {
 public:
  Transaction(MDB_env* env, const string& source);
  POSEIDON_DISABLE_COPY_AND_ASSIGN(Transaction);

  void Put(const string& key, const string& value);
  // Writes the buffered records and clears the buffer; the transaction can
  // be reused for the next group of Put()s.
  void Commit();

 private:
  void DoubleMapSize();

  MDB_env* env_;
  string source_;
  vector<string> keys_;
  vector<string> values_;
};

class DB {
 public:
  DB() = default;
  ~DB() { Close(); }
  POSEIDON_DISABLE_COPY_AND_ASSIGN(DB);

  // Throws IOError("cannot open LMDB '<source>': <reason>") when the database
  // is missing or unreadable, and IOError when NEW finds the path taken.
  // READ opens of one path share one LMDB environment per process (LMDB
  // forbids opening a database twice in one process: closing one copy drops
  // the other's locks), so several nets or worker threads may read the same
  // database at once.
  void Open(const string& source, Mode mode);
  void Close();
  std::unique_ptr<Cursor> NewCursor();
  std::unique_ptr<Transaction> NewTransaction();
  // Number of records.
  size_t Size() const;
  const string& source() const { return source_; }

  struct SharedEnv;  // implementation detail of READ mode

 private:
  MDB_env* env_ = nullptr;
  std::shared_ptr<SharedEnv> shared_;  // READ mode only
  string source_;
};

// Fills a new database, for the convert_* tools: Put() buffers records and
// commits every `commit_every`; Finish() commits the rest and closes. If the
// writer is destroyed without Finish() (an error mid-way), it deletes the
// partial database, so a failed conversion never leaves a database that looks
// complete.
class Writer {
 public:
  // Creates `source` (Mode::NEW); throws like DB::Open.
  Writer(const string& backend, const string& source, int commit_every = 1000);
  ~Writer();
  POSEIDON_DISABLE_COPY_AND_ASSIGN(Writer);

  void Put(const string& key, const string& value);
  void Finish();
  int count() const { return count_; }

 private:
  std::unique_ptr<DB> db_;
  std::unique_ptr<Transaction> txn_;
  string source_;
  int commit_every_;
  int count_ = 0;
  bool finished_ = false;
};

// Deletes an LMDB directory: its data.mdb and lock.mdb, then the directory if
// it is empty. Other files are never touched.
void RemoveLMDB(const string& source);

// A zero-padded record key ("00000042"), so key order is numeric order.
string IndexKey(int index);

// A DB for the backend named in a DataParameter or on a tool's command line
// ("lmdb"). Only LMDB is supported: LEVELDB or an unknown name throws
// ConfigError.
std::unique_ptr<DB> GetDB(DataParameter::DB backend);
std::unique_ptr<DB> GetDB(const string& backend);

}  // namespace db
}  // namespace poseidon

#endif  // POSEIDON_UTIL_DB_HPP_
