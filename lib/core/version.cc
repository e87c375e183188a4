#include "packrec/version.h"

namespace packrec {

const char* Version() { return PACKREC_VERSION_STRING; }

}  // namespace packrec
