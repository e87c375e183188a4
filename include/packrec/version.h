// The library's version.
#ifndef PACKREC_VERSION_H_
#define PACKREC_VERSION_H_

namespace packrec {

// "0.1.0": the project version this library was built as.
const char* Version();

}  // namespace packrec

#endif  // PACKREC_VERSION_H_
