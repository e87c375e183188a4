// Starting threads without std::system_error ending the process. std::thread throws when the
// system refuses a thread (EAGAIN: the user's process limit, `ulimit -u`, kernel.threads-max, or
// no memory for its stack); a library that returns Status turns that into one, and its callers
// stop and join whatever they had started.
#ifndef PACKREC_LIB_CORE_THREADS_H_
#define PACKREC_LIB_CORE_THREADS_H_

#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "core/thread_name.h"
#include "packrec/status.h"

namespace packrec {

// A thread named `name` (at most 15 characters) running `body`; IOError when the system refuses
// it, saying why.
template <typename Body>
Result<std::thread> StartThread(const char* name, Body body) {
  try {
    return std::thread([name, body = std::move(body)]() mutable {
      NameThisThread(name);
      body();
    });
  } catch (const std::system_error& error) {
    return Status::IOError(std::string("cannot start a thread (") + name + "): " + error.what() +
                           "; the system allows no more threads to this user (its process "
                           "limit) or has no memory for one: ask for fewer threads");
  }
}

// Starts `count` threads running `body` into `threads`. On a refusal, the error (naming how many
// had started); those are left in `threads` for the caller to stop and join as usual.
template <typename Body>
Status StartThreads(std::vector<std::thread>& threads, unsigned count, const char* name,
                    const Body& body) {
  for (unsigned i = 0; i < count; ++i) {
    Result<std::thread> thread = StartThread(name, body);
    if (!thread.ok()) {
      return Status::IOError(thread.status().message() + " (" + std::to_string(i) + " of " +
                             std::to_string(count) + " started)");
    }
    threads.push_back(std::move(*thread));
  }
  return Status::OK();
}

}  // namespace packrec

#endif  // PACKREC_LIB_CORE_THREADS_H_
