// Writes a one-record dataset and reads it back through the installed public headers only.
#include <packrec/packrec.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::filesystem::path dir = argv[1];
  auto writer = packrec::CreateDatasetWriter(dir, {});
  if (!writer.ok()) {
    std::fprintf(stderr, "%s\n", writer.status().ToString().c_str());
    return 1;
  }
  const char payload[] = "consumer payload";
  std::vector<std::byte> bytes(sizeof payload);
  std::memcpy(bytes.data(), payload, sizeof payload);
  if (!(*writer)->Add({"a/b.bin", 4, bytes, {}}).ok() || !(*writer)->Finish({}).ok()) return 1;
  auto reader = packrec::OpenDataset(dir);
  if (!reader.ok()) return 1;
  packrec::ReadScratch scratch;
  auto view = (*reader)->Read(0, scratch);
  if (!view.ok() || view->label != 4 || view->key != "a/b.bin" ||
      std::memcmp(view->bytes.data(), payload, sizeof payload) != 0) {
    return 1;
  }
  std::printf("packrec %s consumer OK\n", packrec::Version());
  return 0;
}
