// Start-up checks of the folder snapshots go to, run by Solver::Solve before
// the first iteration so that a folder the run cannot write to ends it at
// once instead of at the first snapshot (see Note [Start-up checks] in
// solver.cpp): the folder exists and is writable, the file system has room
// for one snapshot, and the temporary files earlier killed runs left there
// (Note [Atomic writes] in io.cpp) are removed.
//
// Free functions without state; safe to call from any thread.
#ifndef POSEIDON_UTIL_SNAPSHOT_CHECKS_HPP_
#define POSEIDON_UTIL_SNAPSHOT_CHECKS_HPP_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace poseidon {

// The folder files named "<prefix>_iter_..." go to: the prefix's parent, or
// "." when it names none ("snap" -> ".", "out/snap" -> "out", "/snap" -> "/").
std::string SnapshotFolder(const std::string& prefix);

// Throws IOError naming the folder and the solver field snapshot_prefix when
// SnapshotFolder(prefix) does not exist, is not a folder, or a file cannot be
// created in it (tried by creating and removing
// "<prefix>_iter_startup_check.tmp.<pid>", so that permissions, ACLs,
// read-only mounts and root squashing all count as they will for snapshots).
void CheckSnapshotFolderWritable(const std::string& prefix);

// Bytes available to this user on the file system holding `folder`
// (statvfs: f_bavail x f_frsize); nullopt when statvfs fails.
std::optional<uint64_t> FreeBytes(const std::string& folder);

// The warning to print when `free_bytes` cannot hold `needed_bytes` (one
// snapshot), naming the folder and both sizes; empty when they fit.
std::string LowDiskWarning(const std::string& folder, uint64_t free_bytes,
                           uint64_t needed_bytes);

// True when a process `pid` exists (kill(pid, 0) does not fail with ESRCH;
// a process of another user, EPERM, exists). False for pid <= 0.
bool ProcessExists(pid_t pid);

// The pid of a temporary file an atomic write of a snapshot with `prefix`
// leaves ("<basename of prefix>_iter_<anything>.tmp.<pid>", `name` without
// its folder); nullopt for every other name.
std::optional<pid_t> StaleTemporaryPid(const std::string& prefix,
                                       const std::string& name);

// Removes, from SnapshotFolder(prefix), the temporary files of snapshots
// with `prefix` whose writer no longer exists (ProcessExists false); the
// files of running processes (this one included) and every other file stay.
// Returns the paths removed. Errors (an unreadable folder, a file that
// cannot be removed) are skipped: the files are only clutter.
std::vector<std::string> RemoveStaleSnapshotTemporaries(
    const std::string& prefix);

}  // namespace poseidon

#endif  // POSEIDON_UTIL_SNAPSHOT_CHECKS_HPP_
