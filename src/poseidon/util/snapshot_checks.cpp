// Start-up checks of the snapshot folder; see snapshot_checks.hpp.
#include "poseidon/util/snapshot_checks.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>

#include "poseidon/util/status.hpp"

namespace poseidon {
namespace {

// " (the folder of the solver's snapshot_prefix 'p')": how every error
// names the field to change.
std::string FromField(const std::string& prefix) {
  return StrCat(" (the folder of the solver's snapshot_prefix '", prefix, "')");
}

// The part of `prefix` after its last '/'.
std::string PrefixBase(const std::string& prefix) {
  const size_t slash = prefix.rfind('/');
  return slash == std::string::npos ? prefix : prefix.substr(slash + 1);
}

}  // namespace

std::string SnapshotFolder(const std::string& prefix) {
  const size_t slash = prefix.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return prefix.substr(0, slash);
}

void CheckSnapshotFolderWritable(const std::string& prefix) {
  const std::string folder = SnapshotFolder(prefix);
  struct stat st;
  if (::stat(folder.c_str(), &st) != 0) {
    const int err = errno;
    POSEIDON_THROW(IOError, "snapshot folder '", folder, "'", FromField(prefix),
                   err == ENOENT ? " does not exist" : " cannot be read", " (",
                   std::strerror(err),
                   "); create it or set snapshot_prefix to a writable folder");
  }
  POSEIDON_REQUIRE(S_ISDIR(st.st_mode), IOError, "snapshot folder '", folder,
                   "'", FromField(prefix),
                   " is not a folder; set snapshot_prefix to a writable "
                   "folder");
  // A file named as the temporary files of atomic writes, so that a run
  // killed between these two calls leaves one that the next run removes.
  const std::string probe =
      StrCat(prefix, "_iter_startup_check.tmp.", ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    const int err = errno;
    POSEIDON_THROW(IOError, "snapshot folder '", folder, "'", FromField(prefix),
                   " is not writable (", std::strerror(err),
                   "); make it writable or set snapshot_prefix to a "
                   "writable folder");
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

std::optional<uint64_t> FreeBytes(const std::string& folder) {
  struct statvfs vfs;
  if (::statvfs(folder.c_str(), &vfs) != 0) return std::nullopt;
  return static_cast<uint64_t>(vfs.f_bavail) *
         static_cast<uint64_t>(vfs.f_frsize);
}

std::string LowDiskWarning(const std::string& folder, uint64_t free_bytes,
                           uint64_t needed_bytes) {
  if (free_bytes >= needed_bytes) return std::string();
  return StrCat("snapshot folder '", folder, "' has ", free_bytes,
                " bytes free, but one snapshot needs about ", needed_bytes,
                " bytes (weights and solver state): snapshots may fail; "
                "free space or set snapshot_prefix to another folder");
}

bool ProcessExists(pid_t pid) {
  if (pid <= 0) return false;
  return ::kill(pid, 0) == 0 || errno != ESRCH;
}

std::optional<pid_t> StaleTemporaryPid(const std::string& prefix,
                                       const std::string& name) {
  const std::string head = PrefixBase(prefix) + "_iter_";
  static const char kTmp[] = ".tmp.";
  const size_t dot = name.rfind(kTmp);
  if (name.compare(0, head.size(), head) != 0 || dot == std::string::npos ||
      dot < head.size()) {
    return std::nullopt;
  }
  const std::string digits = name.substr(dot + sizeof(kTmp) - 1);
  if (digits.empty() || digits.size() > 10) return std::nullopt;
  int64_t pid = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    pid = pid * 10 + (c - '0');
  }
  if (pid <= 0 || pid > INT_MAX) return std::nullopt;
  return static_cast<pid_t>(pid);
}

std::vector<std::string> RemoveStaleSnapshotTemporaries(
    const std::string& prefix) {
  const std::string folder = SnapshotFolder(prefix);
  std::vector<std::string> removed;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(folder.c_str()),
                                          &::closedir);
  if (!dir) return removed;
  while (const dirent* entry = ::readdir(dir.get())) {
    const std::string name = entry->d_name;
    const std::optional<pid_t> pid = StaleTemporaryPid(prefix, name);
    if (!pid || ProcessExists(*pid)) continue;
    const std::string path =
        folder == "/" ? "/" + name : StrCat(folder, "/", name);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (::unlink(path.c_str()) == 0) removed.push_back(path);
  }
  return removed;
}

}  // namespace poseidon
