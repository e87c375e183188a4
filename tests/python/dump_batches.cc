// The C++ loader's batches written to a file, for the Python tests to compare packrec.Loader's
// tensors with: for each batch, u32 size, u32 height, u32 width, the images, the int64 labels
// and the uint64 record indices, all little-endian as in memory.
//
//   packrec_dump_batches DATASET OUT BATCH THREADS TRANSFORM SEED EPOCH SIZE
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "packrec/loader.h"

int main(int argc, char** argv) {
  if (argc != 9) {
    std::fprintf(stderr, "usage: %s DATASET OUT BATCH THREADS TRANSFORM SEED EPOCH SIZE\n",
                 argv[0]);
    return 2;
  }
  auto reader = packrec::OpenDataset(argv[1]);
  if (!reader.ok()) {
    std::fprintf(stderr, "%s\n", reader.status().ToString().c_str());
    return 1;
  }
  packrec::LoaderOptions options;
  options.batch_size = static_cast<std::uint32_t>(std::stoul(argv[3]));
  options.threads = static_cast<unsigned>(std::stoul(argv[4]));
  const std::string transform = argv[5];
  options.transform =
      transform == "train" ? packrec::TransformKind::kTrain : packrec::TransformKind::kEval;
  options.seed = std::stoull(argv[6]);
  options.output_size = static_cast<std::uint32_t>(std::stoul(argv[8]));
  options.resize_size = std::max(options.output_size, options.output_size * 256 / 224);
  auto loader = packrec::Loader::Create(std::move(reader).value(), options);
  if (!loader.ok()) {
    std::fprintf(stderr, "%s\n", loader.status().ToString().c_str());
    return 1;
  }
  (*loader)->StartEpoch(std::stoull(argv[7]));
  std::ofstream out(argv[2], std::ios::binary);
  const auto write = [&out](const void* data, std::size_t bytes) {
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  };
  for (;;) {
    auto batch = (*loader)->Next();
    if (!batch.ok()) {
      std::fprintf(stderr, "%s\n", batch.status().ToString().c_str());
      return 1;
    }
    if (*batch == nullptr) break;
    const packrec::Batch& b = **batch;
    const std::uint32_t header[3] = {b.size(), b.height(), b.width()};
    write(header, sizeof header);
    write(b.images().data(), b.images().size());
    write(b.labels().data(), b.labels().size_bytes());
    write(b.record_indices().data(), b.record_indices().size_bytes());
  }
  return out.good() ? 0 : 1;
}
