// Names the calling thread (at most 15 characters), so that top -H, perf and gdb tell packrec's
// threads apart: which one caps an import or a loader is the first thing to ask of a profile.
#ifndef PACKREC_LIB_CORE_THREAD_NAME_H_
#define PACKREC_LIB_CORE_THREAD_NAME_H_

#include <pthread.h>

namespace packrec {

inline void NameThisThread(const char* name) { pthread_setname_np(pthread_self(), name); }

}  // namespace packrec

#endif  // PACKREC_LIB_CORE_THREAD_NAME_H_
