// Reading and writing protobuf files: text prototxt with errors that name
// file:line:column, binary files (.caffemodel, .solverstate, .binaryproto)
// with size checks, and atomic writes (a temporary file renamed into place, so
// a crash mid-write never leaves a truncated file under the final name).
#ifndef POSEIDON_UTIL_IO_HPP_
#define POSEIDON_UTIL_IO_HPP_

#include <google/protobuf/message.h>

#include <string>

#include "poseidon/common.hpp"

namespace poseidon {

// Parses a text-format message. Unknown fields, malformed values and syntax
// errors throw ConfigError("file:line:column: what"); a missing file throws
// IOError.
void ReadProtoFromTextFile(const string& filename,
                           google::protobuf::Message* proto);
// Parses text from memory; `source` names it in error messages.
void ReadProtoFromTextString(const string& text, const string& source,
                             google::protobuf::Message* proto);
// Parses a binary message; missing, unreadable, truncated or otherwise
// corrupt files throw IOError naming the file.
void ReadProtoFromBinaryFile(const string& filename,
                             google::protobuf::Message* proto);
// Parses binary bytes from memory; `source` names them in error messages.
void ReadProtoFromBinaryString(const string& bytes, const string& source,
                               google::protobuf::Message* proto);

// Atomic writes (write to "<file>.tmp.<pid>", fsync, rename, fsync of the
// directory): a reader, or a run after a crash or SIGKILL at any point, sees
// either the previous file or the whole new one. See Note [Atomic writes].
void WriteProtoToTextFile(const google::protobuf::Message& proto,
                          const string& filename);
void WriteProtoToBinaryFile(const google::protobuf::Message& proto,
                            const string& filename);
// Writes bytes atomically.
void WriteFileAtomically(const string& filename, const string& contents);
// For files another library writes (HDF5): write to TemporaryFileFor(name)
// ("<name>.tmp.<pid>"), then CommitFileAtomically fsyncs it, renames it over
// `filename` and fsyncs the directory (IOError naming both if it cannot;
// the temporary file is removed then).
string TemporaryFileFor(const string& filename);
void CommitFileAtomically(const string& tmp, const string& filename);

constexpr size_t kMaxProtoFileBytes = 2147483647;

// Reads a whole file; throws IOError naming it if it cannot, if it is not a
// regular file, or if it is larger than `max_bytes` (by default 2 GB - 1,
// the most a protobuf message can hold), before reading any of it.
string ReadFileToString(const string& filename,
                        size_t max_bytes = kMaxProtoFileBytes);
bool FileExists(const string& filename);

}  // namespace poseidon

#endif  // POSEIDON_UTIL_IO_HPP_
