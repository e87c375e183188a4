// Fuzz target: packrec's HDF5 reader, on files whose HDF5 structure is sound and whose contents
// are not. The input is a list of edits applied through the HDF5 API to a copy of a file packrec
// wrote (tests/fuzz/hdf5_templates/: the encoded and the pixels layout): patch a dataset's or an
// attribute's bytes, delete it, recreate it with another length, shape or type. The library then
// parses only metadata it wrote itself, so what this finds is in packrec's checks of what it reads
// (sizes, shapes, types, offsets, the manifest), not in libhdf5's parser of damaged metadata;
// fuzz_hdf5_file feeds raw bytes to that parser, outside CI (docs/reliability.md says why).
//
// Input: byte 0 picks the template; then edits, each: OP TARGET, and OP's arguments.
//   OP % 4 == 0  patch: OFFSET (2 bytes), LENGTH (1 byte), LENGTH bytes written over the raw
//                values (a string attribute: over its text)
//   OP % 4 == 1  delete
//   OP % 4 == 2  recreate with the same element type: COUNT (2 bytes), RANK (1 byte: 1 + % 2),
//                the values from the input
//   OP % 4 == 3  recreate with another type: TYPE (1 byte), COUNT (2 bytes), the values
// Missing input bytes read as 0.
#include <hdf5.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "fuzz_util.h"
#include "hdf5/hdf5_util.h"

namespace {

using packrec::hdf5::Handle;

constexpr std::array<const char*, 16> kDatasets = {
    "data",      "offsets",   "labels",   "keys",          "key_bytes", "key_offsets",
    "width",     "height",    "channels", "encoding",      "flags",     "subsampling",
    "checksums", "raw_sizes", "images",   "meta_checksums"};
constexpr std::array<const char*, 2> kAttributes = {"packrec_manifest", "classes"};

class Input {
 public:
  explicit Input(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}
  bool empty() const { return at_ >= bytes_.size(); }
  std::uint8_t Byte() { return at_ < bytes_.size() ? bytes_[at_++] : 0; }
  // Reads in sequence: the operands of one expression are not (gcc and clang order them apart,
  // and a corpus input must mean the same in the fuzzer and in the replay).
  std::uint16_t Word() {
    const std::uint8_t low = Byte();
    const std::uint8_t high = Byte();
    return static_cast<std::uint16_t>(low | (high << 8));
  }
  std::vector<std::uint8_t> Bytes(std::size_t count) {
    std::vector<std::uint8_t> out(count);
    for (std::uint8_t& byte : out) byte = Byte();
    return out;
  }

 private:
  std::span<const std::uint8_t> bytes_;
  std::size_t at_ = 0;
};

hid_t NativeType(std::uint8_t choice) {
  const std::array<hid_t, 6> types = {H5T_NATIVE_UINT8, H5T_NATIVE_UINT32, H5T_NATIVE_UINT64,
                                      H5T_NATIVE_INT64, H5T_NATIVE_DOUBLE, H5T_NATIVE_INT8};
  return types[choice % types.size()];
}

// A dataset `name` of `count` x `type` (rank 2: count x 2), filled from the input.
void CreateDataset(hid_t file, const char* name, hid_t type, std::uint16_t count, int rank,
                   Input& input) {
  const std::array<hsize_t, 2> dims = {count, 2};
  Handle space(H5Screate_simple(rank, dims.data(), nullptr), H5Sclose);
  Handle dataset(H5Dcreate2(file, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                 H5Dclose);
  if (!dataset.valid()) return;
  const std::size_t bytes = std::size_t{count} * (rank == 2 ? 2 : 1) * H5Tget_size(type);
  const std::vector<std::uint8_t> values = input.Bytes(bytes);
  if (bytes > 0) {
    H5Dwrite(dataset.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  }
}

void EditDataset(hid_t file, const char* name, std::uint8_t op, Input& input) {
  if (H5Lexists(file, name, H5P_DEFAULT) <= 0) {
    if (op % 4 >= 2) {
      const hid_t type = NativeType(input.Byte());
      const std::uint16_t count = input.Word();
      CreateDataset(file, name, type, count, 1, input);
    }
    return;
  }
  Handle dataset(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
  Handle file_type(H5Dget_type(dataset.get()), H5Tclose);
  const bool strings = H5Tis_variable_str(file_type.get()) > 0;
  Handle type(
      strings ? H5Tcopy(H5T_NATIVE_UINT8) : H5Tget_native_type(file_type.get(), H5T_DIR_DEFAULT),
      H5Tclose);
  switch (op % 4) {
    case 0: {  // patch the raw values in place
      const std::size_t offset = input.Word();
      const std::vector<std::uint8_t> patch = input.Bytes(input.Byte());
      if (strings) return;
      Handle space(H5Dget_space(dataset.get()), H5Sclose);
      const hssize_t points = H5Sget_simple_extent_npoints(space.get());
      const std::size_t size = static_cast<std::size_t>(points) * H5Tget_size(type.get());
      if (points <= 0 || size > (std::size_t{1} << 24)) return;
      std::vector<std::uint8_t> values(size);
      if (H5Dread(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) < 0) {
        return;
      }
      for (std::size_t i = 0; i < patch.size() && offset + i < size; ++i) {
        values[offset + i] = patch[i];
      }
      H5Dwrite(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
      return;
    }
    case 1:
      dataset = Handle();
      H5Ldelete(file, name, H5P_DEFAULT);
      return;
    default: {
      const hid_t new_type = op % 4 == 2 ? type.get() : NativeType(input.Byte());
      const std::uint16_t count = input.Word();
      const int rank = 1 + input.Byte() % 2;
      dataset = Handle();
      H5Ldelete(file, name, H5P_DEFAULT);
      CreateDataset(file, name, new_type, count, rank, input);
      return;
    }
  }
}

void EditAttribute(hid_t file, const char* name, std::uint8_t op, Input& input) {
  std::string text;
  if (H5Aexists(file, name) > 0) {
    Handle attribute(H5Aopen(file, name, H5P_DEFAULT), H5Aclose);
    Handle type(H5Aget_type(attribute.get()), H5Tclose);
    Handle space(H5Aget_space(attribute.get()), H5Sclose);
    char* value = nullptr;
    if (H5Tis_variable_str(type.get()) > 0 && H5Sget_simple_extent_npoints(space.get()) == 1 &&
        H5Aread(attribute.get(), type.get(), &value) >= 0 && value != nullptr) {
      text = value;
      H5free_memory(value);
    }
    attribute = Handle();
    H5Adelete(file, name);
  }
  if (op % 4 == 1) return;
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), H5T_VARIABLE);
  hsize_t count = 1;
  if (op % 4 == 0) {
    const std::size_t offset = input.Word();
    const std::vector<std::uint8_t> patch = input.Bytes(input.Byte());
    if (offset < text.size()) {
      text.replace(offset, std::min(patch.size(), text.size() - offset),
                   reinterpret_cast<const char*>(patch.data()), patch.size());
    }
  } else {
    // A string array where one string is expected, or the text as numbers.
    count = 1 + input.Byte() % 3;
    if (op % 4 == 3) {
      const std::uint8_t number = input.Byte();
      Handle space(H5Screate_simple(1, &count, nullptr), H5Sclose);
      Handle attribute(
          H5Acreate2(file, name, H5T_NATIVE_UINT8, space.get(), H5P_DEFAULT, H5P_DEFAULT),
          H5Aclose);
      const std::array<std::uint8_t, 3> values = {number, number, number};
      if (attribute.valid()) H5Awrite(attribute.get(), H5T_NATIVE_UINT8, values.data());
      return;
    }
  }
  std::string terminated = text;
  terminated.resize(std::strlen(text.c_str()));  // HDF5 strings end at the first NUL
  const std::array<const char*, 3> values = {terminated.c_str(), terminated.c_str(),
                                             terminated.c_str()};
  Handle space(H5Screate_simple(1, &count, nullptr), H5Sclose);
  Handle attribute(H5Acreate2(file, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                   H5Aclose);
  if (attribute.valid()) H5Awrite(attribute.get(), type.get(), values.data());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input input({data, size});
  const char* templates[] = {PACKREC_FUZZ_HDF5_TEMPLATES "/encoded.h5",
                             PACKREC_FUZZ_HDF5_TEMPLATES "/pixels.h5"};
  static const std::array<std::vector<std::byte>, 2> kTemplates = [&] {
    std::array<std::vector<std::byte>, 2> files;
    for (std::size_t i = 0; i < files.size(); ++i) {
      auto bytes = packrec::ReadWholeFile(templates[i]);
      if (!bytes.ok()) __builtin_trap();  // the build tree names the source tree's templates
      files[i] = std::move(*bytes);
    }
    return files;
  }();
  const std::filesystem::path path = packrec::fuzz::ScratchDir() / "input.h5";
  if (!packrec::WriteWholeFile(path, kTemplates[input.Byte() % 2], true).ok()) return 0;
  {
    std::lock_guard lock(packrec::hdf5::LibraryMutex());
    packrec::hdf5::PrepareLibrary();
    Handle file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    if (!file.valid()) return 0;
    for (int edits = 0; !input.empty() && edits < 16; ++edits) {
      const std::uint8_t op = input.Byte();
      const std::size_t target = input.Byte() % (kDatasets.size() + kAttributes.size());
      if (target < kDatasets.size()) {
        EditDataset(file.get(), kDatasets[target], op, input);
      } else {
        EditAttribute(file.get(), kAttributes[target - kDatasets.size()], op, input);
      }
    }
  }
  packrec::fuzz::ReadEverything(path);
  return 0;
}
