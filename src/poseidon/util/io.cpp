// Protobuf file I/O with precise errors and atomic writes.
#include "poseidon/util/io.hpp"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "poseidon/util/alloc_guard.hpp"

namespace poseidon {
namespace {

// Collects the first parse error with its position (protobuf reports 0-based
// lines and columns; we print 1-based as editors do).
class ErrorCollector final : public google::protobuf::io::ErrorCollector {
 public:
  explicit ErrorCollector(string source) : source_(std::move(source)) {}
  void AddError(int line, int column, const string& message) override {
    if (!first_.empty()) return;
    first_ = StrCat(source_, ":", line + 1, ":", column + 1, ": ", message);
    line_ = line;
    column_ = column;
  }
  void AddWarning(int line, int column, const string& message) override {
    LOG(WARNING) << source_ << ":" << line + 1 << ":" << column + 1 << ": "
                 << message;
  }
  const string& first() const { return first_; }
  int line() const { return line_; }
  int column() const { return column_; }

 private:
  string source_;
  string first_;
  int line_ = -1;
  int column_ = -1;
};

// " (in 'pad: -1 }')": the text of 0-based `line` around `column`, at most
// about 80 characters, so that a message whose own words do not name the
// field (protobuf's "Expected integer, got: -") still shows it.
string QuoteSourceLine(const string& text, int line, int column) {
  size_t begin = 0;
  for (int i = 0; i < line && begin < text.size(); ++i) {
    begin = text.find('\n', begin);
    begin = begin == string::npos ? text.size() : begin + 1;
  }
  if (line < 0 || begin >= text.size()) return "";
  const size_t end = std::min(text.find('\n', begin), text.size());
  string quoted = text.substr(begin, end - begin);
  constexpr size_t kWidth = 80;
  if (quoted.size() > kWidth) {
    const size_t at = std::min<size_t>(std::max(column, 0), quoted.size());
    const size_t from = at > kWidth / 2 ? at - kWidth / 2 : 0;
    quoted = StrCat(from > 0 ? "..." : "", quoted.substr(from, kWidth),
                    from + kWidth < quoted.size() ? "..." : "");
  }
  const size_t first = quoted.find_first_not_of(" \t\r");
  if (first == string::npos) return "";
  quoted = quoted.substr(first, quoted.find_last_not_of(" \t\r") + 1 - first);
  return StrCat(" (in '", EscapeForMessage(quoted), "')");
}

}  // namespace

bool FileExists(const string& filename) {
  struct stat st;
  return ::stat(filename.c_str(), &st) == 0;
}

string ReadFileToString(const string& filename, size_t max_bytes) {
  struct stat st;
  if (::stat(filename.c_str(), &st) != 0) {
    POSEIDON_THROW(IOError, "cannot open '", filename, "': ",
                   std::strerror(errno));
  }
  POSEIDON_REQUIRE(!S_ISDIR(st.st_mode), IOError, "cannot read '", filename,
                   "': it is a directory");
  // Checked before reading: a regular file's size is known in advance.
  POSEIDON_REQUIRE(!S_ISREG(st.st_mode) ||
                       static_cast<uint64_t>(st.st_size) <= max_bytes,
                   IOError, "'", filename, "' is ", st.st_size, " bytes (",
                   HumanBytes(static_cast<double>(st.st_size)),
                   "), more than the ", max_bytes, " bytes it may hold");
  std::ifstream in(filename, std::ios::binary);
  if (!in) {
    POSEIDON_THROW(IOError, "cannot open '", filename, "': ",
                   std::strerror(errno));
  }
  string contents;
  if (S_ISREG(st.st_mode)) contents.reserve(static_cast<size_t>(st.st_size));
  char buffer[1 << 16];
  while (in.read(buffer, sizeof(buffer)) || in.gcount() > 0) {
    const size_t n = static_cast<size_t>(in.gcount());
    POSEIDON_REQUIRE(contents.size() + n <= max_bytes, IOError, "'", filename,
                     "' holds more than the ", max_bytes,
                     " bytes it may hold");
    contents.append(buffer, n);
  }
  if (in.bad()) POSEIDON_THROW(IOError, "error reading '", filename, "'");
  return contents;
}

void ReadProtoFromTextString(const string& text, const string& source,
                             google::protobuf::Message* proto) {
  google::protobuf::TextFormat::Parser parser;
  ErrorCollector errors(source);
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, proto)) {
    POSEIDON_THROW(
        ConfigError,
        errors.first().empty()
            ? StrCat(source, ": cannot parse as ", proto->GetTypeName())
            : StrCat(errors.first(),
                     QuoteSourceLine(text, errors.line(), errors.column())));
  }
}

void ReadProtoFromTextFile(const string& filename,
                           google::protobuf::Message* proto) {
  ReadProtoFromTextString(ReadFileToString(filename), filename, proto);
}

void ReadProtoFromBinaryString(const string& bytes, const string& source,
                               google::protobuf::Message* proto) {
  POSEIDON_REQUIRE(bytes.size() <= kMaxProtoFileBytes, IOError, "'", source,
                   "' is ", bytes.size(), " bytes, more than a protobuf "
                   "message can hold (2 GB)");
  google::protobuf::io::CodedInputStream input(
      reinterpret_cast<const uint8_t*>(bytes.data()),
      static_cast<int>(bytes.size()));
  input.SetTotalBytesLimit(INT_MAX);  // weights files exceed the 64 MB default
  if (!proto->ParseFromCodedStream(&input) || !input.ConsumedEntireMessage()) {
    POSEIDON_THROW(IOError, "'", source, "' is not a valid binary ",
                   proto->GetTypeName(),
                   " (truncated or corrupt file of ", bytes.size(), " bytes)");
  }
  if (!proto->IsInitialized()) {
    POSEIDON_THROW(IOError, "'", source, "' lacks required fields of ",
                   proto->GetTypeName(), ": ",
                   proto->InitializationErrorString());
  }
}

void ReadProtoFromBinaryFile(const string& filename,
                             google::protobuf::Message* proto) {
  ReadProtoFromBinaryString(ReadFileToString(filename), filename, proto);
}

// Note [Atomic writes]
// Snapshots (.caffemodel, .solverstate) and every other file Poseidon writes
// go through WriteFileAtomically: the bytes go to "<file>.tmp.<pid>" in the
// same directory, are fsync'ed, and the temporary file is renamed over the
// final name; then the directory is fsync'ed so the rename itself is on disk.
// rename() replaces a name in one step, so whenever the process dies (a
// SIGKILL, a crash, mpirun ending the job) the final name holds either its
// previous contents or all of the new ones, never a prefix; what a death
// leaves is at most a stray "*.tmp.<pid>" file. A snapshot is two files,
// written model first: a death between them leaves a .caffemodel without its
// .solverstate, and the previous iteration's pair untouched, which is what
// resuming uses. Files written by a library (HDF5 snapshots) are written to
// the same temporary name and committed by CommitFileAtomically.
// test_snapshot_kill.sh kills poseidon_train in the middle of writing a
// snapshot (POSEIDON_TEST_PAUSE_WRITING, below) and resumes from the
// previous one.

namespace {

// For tests of Note [Atomic writes]: when POSEIDON_TEST_PAUSE_WRITING is set
// and `filename` contains its value, the write stops (half way through the
// temporary file, or before the rename of one written by a library), says
// so on stderr and waits to be killed.
void MaybePauseForTest(const string& filename, const string& tmp) {
  const char* match = std::getenv("POSEIDON_TEST_PAUSE_WRITING");
  if (match == nullptr || *match == '\0' ||
      filename.find(match) == string::npos) {
    return;
  }
  std::fprintf(stderr, "POSEIDON_TEST_PAUSE_WRITING: paused half way through "
               "'%s'\n", tmp.c_str());
  std::fflush(stderr);
  for (;;) ::pause();
}

// fsync of the directory holding `filename`, so that a rename in it is
// durable. Failures are ignored: some file systems refuse fsync on a
// directory, and the rename has happened either way.
void SyncDirectoryOf(const string& filename) {
  const size_t slash = filename.rfind('/');
  const string dir = slash == string::npos ? string(".")
                     : slash == 0          ? string("/")
                                           : filename.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void WriteFileAtomically(const string& filename, const string& contents) {
  // See Note [Atomic writes].
  const string tmp = TemporaryFileFor(filename);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    POSEIDON_THROW(IOError, "cannot create '", tmp, "': ",
                   std::strerror(errno));
  }
  size_t written = 0;
  bool paused = false;
  while (written < contents.size()) {
    size_t chunk = contents.size() - written;
    if (!paused && written < contents.size() / 2) {
      chunk = std::max<size_t>(contents.size() / 2 - written, 1);
    }
    ssize_t n = ::write(fd, contents.data() + written, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      POSEIDON_THROW(IOError, "cannot write '", tmp, "': ",
                     std::strerror(err));
    }
    written += static_cast<size_t>(n);
    if (!paused && written >= contents.size() / 2) {
      paused = true;
      MaybePauseForTest(filename, tmp);
    }
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    POSEIDON_THROW(IOError, "cannot flush '", tmp, "': ", std::strerror(err));
  }
  if (::rename(tmp.c_str(), filename.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    POSEIDON_THROW(IOError, "cannot rename '", tmp, "' to '", filename,
                   "': ", std::strerror(err));
  }
  SyncDirectoryOf(filename);
}

string TemporaryFileFor(const string& filename) {
  return StrCat(filename, ".tmp.", ::getpid());
}

void CommitFileAtomically(const string& tmp, const string& filename) {
  // See Note [Atomic writes].
  const int fd = ::open(tmp.c_str(), O_RDONLY);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    POSEIDON_THROW(IOError, "cannot flush '", tmp, "': ", std::strerror(err));
  }
  ::close(fd);
  MaybePauseForTest(filename, tmp);
  if (::rename(tmp.c_str(), filename.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    POSEIDON_THROW(IOError, "cannot rename '", tmp, "' to '", filename,
                   "': ", std::strerror(err));
  }
  SyncDirectoryOf(filename);
}

void WriteProtoToTextFile(const google::protobuf::Message& proto,
                          const string& filename) {
  string text;
  CHECK(google::protobuf::TextFormat::PrintToString(proto, &text));
  WriteFileAtomically(filename, text);
}

void WriteProtoToBinaryFile(const google::protobuf::Message& proto,
                            const string& filename) {
  string bytes;
  if (!proto.SerializeToString(&bytes)) {
    POSEIDON_THROW(IOError, "cannot serialise ", proto.GetTypeName(),
                   " for '", filename, "' (over 2 GB?)");
  }
  WriteFileAtomically(filename, bytes);
}

}  // namespace poseidon
