// CPU lists ("0", "1-3", "0,2-3") for pinning threads, as the Linux
// cpuset / taskset syntax writes them. orreryd uses them to keep the lanes
// on their own cores and the serving threads (gRPC, loaders, ledger) off
// them, so that a lane's run is not descheduled by request handling and its
// measured time stays what the scheduler predicted.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace orrery {

// Sorted, distinct CPU numbers. INVALID_ARGUMENT names the bad part of
// `text` (empty, not a number, a reversed range, above 4095).
Result<std::vector<int>> ParseCpuList(std::string_view text);

// The CPUs this process may run on (sched_getaffinity of the calling thread).
std::vector<int> AllowedCpus();

// INVALID_ARGUMENT naming the first CPU of `cpus` not in AllowedCpus().
// `what` names the option in the message (e.g. "--lane-cpus").
Status CheckCpusAllowed(const std::vector<int>& cpus, std::string_view what);

// Restricts the calling thread (and threads it creates afterwards, which
// inherit the mask) to `cpus`. One syscall.
Status PinThisThread(const std::vector<int>& cpus);

// PinThisThread for every thread of this process (listed in /proc/self/task),
// so that threads libraries started earlier are restricted too. Used by
// tools (orrery-loadgen) that must start a server on any CPU first.
Status PinThisProcess(const std::vector<int>& cpus);

// True when both lists are non-empty and share no CPU: threads pinned to
// `a` then have those CPUs to themselves as far as threads pinned to `b`
// go (orreryd: lanes with CPUs of their own, apart from serving).
bool CpuListsDisjoint(const std::vector<int>& a, const std::vector<int>& b);

// "0-2,5": the inverse of ParseCpuList, for logs and messages.
std::string FormatCpuList(const std::vector<int>& cpus);

}  // namespace orrery
