// A small key/value database interface, the store that the Data layer reads
// and the convert_* tools write, with two backends as in Caffe: LMDB and
// LevelDB. Keys are kept sorted, so a cursor visits records in key order (the
// tools write zero-padded indices, so key order is insertion order).
//
//   std::unique_ptr<db::DB> db = db::GetDB("leveldb");   // or "lmdb"
//   db->Open(path, db::Mode::READ);
//   for (auto c = db->NewCursor(); c->valid(); c->Next()) Use(c->value());
//
// Ownership: GetDB() returns an owning pointer; NewCursor() and
// NewTransaction() return objects that observe the DB and must be destroyed
// before it is closed.
//
// Thread safety: one DB object is used by one thread at a time, and so is
// each cursor and transaction; a cursor may be created on one thread and used
// on another (the Data layer's prefetch thread). READ opens of one directory
// within a process share one underlying handle (one LMDB environment, one
// leveldb::DB), so any number of DB objects, threads and layers may read the
// same database at once. Across processes the backends differ: many
// processes may read one LMDB, but LevelDB locks its directory for the one
// process that opened it (see Note [LevelDB locks]). One writer at a time per
// database.
#ifndef POSEIDON_UTIL_DB_HPP_
#define POSEIDON_UTIL_DB_HPP_

#include <memory>
#include <optional>
#include <string>

#include "poseidon/common.hpp"
#include "poseidon/proto/caffe.pb.h"

namespace poseidon {
namespace db {

// READ: an existing database, read-only. WRITE: an existing database, to add
// or overwrite records. NEW: create the directory and a fresh database;
// fails if the path already exists (so nothing is overwritten by accident).
enum class Mode { READ, WRITE, NEW };

// Iterates over the records in key order from a read-only snapshot taken
// when the cursor was created: records written afterwards are not seen.
// Starts on the first record. A read error (a corrupt LevelDB block, an LMDB
// failure) throws IOError naming the database; it never ends the iteration
// silently.
class Cursor {
 public:
  virtual ~Cursor() = default;

  virtual void SeekToFirst() = 0;
  // Requires valid().
  virtual void Next() = 0;
  // Valid only while valid() is true.
  virtual string key() const = 0;
  virtual string value() const = 0;
  virtual bool valid() const = 0;
};

// Buffers Put()s and writes them together on Commit(): one LMDB write
// transaction, or one leveldb::WriteBatch. A later Put() of a key replaces
// the earlier value.
class Transaction {
 public:
  virtual ~Transaction() = default;

  virtual void Put(const string& key, const string& value) = 0;
  // Writes the buffered records and clears the buffer; the transaction can
  // be reused for the next group of Put()s. Throws IOError naming the
  // database.
  virtual void Commit() = 0;
};

class DB {
 public:
  virtual ~DB() = default;

  // Throws IOError("cannot open <backend> '<source>': <reason>") when the
  // database is missing, unreadable or locked, and IOError when NEW finds
  // the path taken. READ opens of one path (compared after resolving it)
  // share one handle per process; see the file comment.
  virtual void Open(const string& source, Mode mode) = 0;
  // Idempotent; the destructor calls it.
  virtual void Close() = 0;
  virtual std::unique_ptr<Cursor> NewCursor() = 0;
  virtual std::unique_ptr<Transaction> NewTransaction() = 0;
  // Number of records. Constant time for LMDB; LevelDB keeps no count, so
  // there it reads every key (a pass over the whole database).
  virtual size_t Size() const = 0;
  // "LMDB" or "LevelDB", for messages.
  virtual const char* name() const = 0;
  // The path given to Open().
  virtual const string& source() const = 0;
};

// The backends. GetDB() and RemoveDB() below are the usual way to reach
// them. RemoveLMDB() deletes data.mdb and lock.mdb; RemoveLevelDB() the
// files LevelDB names (as leveldb::DestroyDB does); then either removes the
// directory if it is empty. Other files are never touched.
std::unique_ptr<DB> NewLMDB();
std::unique_ptr<DB> NewLevelDB();
void RemoveLMDB(const string& source);
void RemoveLevelDB(const string& source);

// For the backends: whether `path` exists, and the key under which a
// process shares one opening of a database directory (its absolute path
// without "." or ".." parts, symbolic links or a trailing '/'; `source`
// itself when it cannot be resolved).
bool PathExists(const string& path);
string ResolvedPath(const string& source);

// A closed DB for a backend as a DataParameter names it, or as a tool's
// --backend flag does ("lmdb" or "leveldb", in any case). An unknown name
// throws ConfigError listing the two.
std::unique_ptr<DB> GetDB(DataParameter::DB backend);
std::unique_ptr<DB> GetDB(const string& backend);
// The DataParameter value for a backend name; throws like GetDB.
DataParameter::DB ParseBackend(const string& backend);
// "lmdb" or "leveldb" (the tools' spelling).
string BackendName(DataParameter::DB backend);

// What the directory `source` holds, from its files: LMDB when it has
// data.mdb, LevelDB when it has CURRENT. nullopt when it holds neither (it is
// missing, empty, or something else) or, oddly, both.
std::optional<DataParameter::DB> DetectBackend(const string& source);

// The backend to read `source` with, for a reader that was asked for
// `requested` (nullopt: nothing was asked) and otherwise uses `fallback`.
// When the directory shows its backend, that one is used; if it is not the
// one asked for, a warning says so, starting with `who` (such as "Data
// layer 'mnist'"). When it shows none, `requested` or else `fallback` is
// used, and opening reports what is wrong. See Note [Choosing a backend].
DataParameter::DB ChooseReadBackend(const string& source,
                                    std::optional<DataParameter::DB> requested,
                                    DataParameter::DB fallback,
                                    const string& who);

// Fills a new database, for the convert_* tools: Put() buffers records and
// commits every `commit_every`; Finish() commits the rest and closes. If the
// writer is destroyed without Finish() (an error mid-way), it deletes the
// partial database, so a failed conversion never leaves a database that looks
// complete.
class Writer {
 public:
  // Creates `source` (Mode::NEW) with the backend named as for GetDB();
  // throws like GetDB and DB::Open.
  Writer(const string& backend, const string& source, int commit_every = 1000);
  ~Writer();
  POSEIDON_DISABLE_COPY_AND_ASSIGN(Writer);

  void Put(const string& key, const string& value);
  void Finish();
  int count() const { return count_; }

 private:
  DataParameter::DB backend_;
  std::unique_ptr<DB> db_;
  std::unique_ptr<Transaction> txn_;
  string source_;
  int commit_every_;
  int count_ = 0;
  bool finished_ = false;
};

// Deletes a database of the given backend (RemoveLMDB or RemoveLevelDB).
// The database must not be open.
void RemoveDB(DataParameter::DB backend, const string& source);

// A zero-padded record key ("00000042"), so key order is numeric order.
string IndexKey(int index);

}  // namespace db
}  // namespace poseidon

#endif  // POSEIDON_UTIL_DB_HPP_
