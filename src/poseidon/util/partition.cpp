// Splitting a database into per-worker parts.
#include "poseidon/util/partition.hpp"

#include <sys/stat.h>

#include <memory>
#include <optional>

#include "poseidon/util/db.hpp"

namespace poseidon {

string PartitionName(const string& source, int part) {
  string base = source;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  return StrCat(base, "_", part);
}

vector<size_t> PartitionDB(const string& source, int parts,
                           const string& backend) {
  POSEIDON_REQUIRE(parts >= 1, ConfigError,
                   "partition: the number of parts must be at least 1 (got ",
                   parts, ")");
  std::optional<DataParameter::DB> requested;
  if (!backend.empty()) requested = db::ParseBackend(backend);
  // The source is read as what it is; the parts are of the backend asked
  // for, or of the source's.
  const DataParameter::DB input_backend = db::ChooseReadBackend(
      source, std::nullopt, requested.value_or(DataParameter::LMDB),
      "partition");
  const string output_backend =
      db::BackendName(requested.value_or(input_backend));
  std::unique_ptr<db::DB> input = db::GetDB(input_backend);
  input->Open(source, db::Mode::READ);
  for (int k = 0; k < parts; ++k) {
    const string name = PartitionName(source, k);
    struct stat info;
    POSEIDON_REQUIRE(::stat(name.c_str(), &info) != 0, IOError,
                     "partition: part '", name,
                     "' already exists; remove it first (parts are never "
                     "overwritten)");
  }

  vector<std::unique_ptr<db::Writer>> writers;
  for (int k = 0; k < parts; ++k) {
    writers.emplace_back(
        new db::Writer(output_backend, PartitionName(source, k)));
  }
  vector<size_t> counts(parts, 0);
  {
    std::unique_ptr<db::Cursor> cursor = input->NewCursor();
    size_t index = 0;
    for (cursor->SeekToFirst(); cursor->valid(); cursor->Next(), ++index) {
      const size_t part = index % static_cast<size_t>(parts);
      writers[part]->Put(cursor->key(), cursor->value());
      ++counts[part];
    }
  }
  for (auto& writer : writers) writer->Finish();
  return counts;
}

}  // namespace poseidon
