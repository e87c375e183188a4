#include "hdf5/hdf5_util.h"

namespace packrec::hdf5 {

std::mutex& LibraryMutex() {
  static std::mutex mutex;
  return mutex;
}

void PrepareLibrary() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Fails, harmlessly, when the library was initialized already (h5py in the same process).
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  });
}

std::string LastError() {
  std::string message;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned, const H5E_error2_t* error, void* out) -> herr_t {
        auto* text = static_cast<std::string*>(out);
        if (text->empty() && error->desc != nullptr) *text = error->desc;
        return 0;
      },
      &message);
  return message;
}

Status Hdf5Error(StatusCode code, const std::string& operation, const std::filesystem::path& path) {
  std::string message = "hdf5 " + operation + " " + path.string();
  const std::string detail = LastError();
  if (!detail.empty()) message += ": " + detail;
  return {code, std::move(message)};
}

}  // namespace packrec::hdf5
