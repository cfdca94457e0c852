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
#include <cstring>
#include <fstream>
#include <sstream>

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

string ReadFileToString(const string& filename) {
  std::ifstream in(filename, std::ios::binary);
  if (!in) {
    POSEIDON_THROW(IOError, "cannot open '", filename, "': ",
                   std::strerror(errno));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) POSEIDON_THROW(IOError, "error reading '", filename, "'");
  return ss.str();
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

void ReadProtoFromBinaryFile(const string& filename,
                             google::protobuf::Message* proto) {
  const string bytes = ReadFileToString(filename);
  google::protobuf::io::CodedInputStream input(
      reinterpret_cast<const uint8_t*>(bytes.data()),
      static_cast<int>(bytes.size()));
  input.SetTotalBytesLimit(INT_MAX);  // weights files exceed the 64 MB default
  if (!proto->ParseFromCodedStream(&input) || !input.ConsumedEntireMessage()) {
    POSEIDON_THROW(IOError, "'", filename, "' is not a valid binary ",
                   proto->GetTypeName(),
                   " (truncated or corrupt file of ", bytes.size(), " bytes)");
  }
  if (!proto->IsInitialized()) {
    POSEIDON_THROW(IOError, "'", filename, "' lacks required fields of ",
                   proto->GetTypeName(), ": ",
                   proto->InitializationErrorString());
  }
}

void WriteFileAtomically(const string& filename, const string& contents) {
  const string tmp = StrCat(filename, ".tmp.", ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    POSEIDON_THROW(IOError, "cannot create '", tmp, "': ",
                   std::strerror(errno));
  }
  size_t written = 0;
  while (written < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + written,
                        contents.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      POSEIDON_THROW(IOError, "cannot write '", tmp, "': ",
                     std::strerror(err));
    }
    written += static_cast<size_t>(n);
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
