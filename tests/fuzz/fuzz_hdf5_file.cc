// Fuzz target: the HDF5 reader. The input is written as an .h5 file and opened and read through
// every entry point. The HDF5 library parses the file's metadata itself; packrec checks every
// dataset it uses (docs/reliability.md says what is guarded).
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/file_io.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  const std::filesystem::path file = packrec::fuzz::ScratchDir() / "input.h5";
  if (!packrec::WriteWholeFile(file, bytes, true).ok()) return 0;
  packrec::fuzz::ReadEverything(file);
  return 0;
}
