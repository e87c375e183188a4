// A reader of shard datasets that links packrec::shard alone (no registry, no other format): it
// reads back the dataset `consumer` wrote, then writes and reads one of its own.
#include <packrec/shard.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

namespace {

bool ReadsBack(const std::filesystem::path& dir, const char* payload, std::size_t size,
               std::uint32_t label) {
  auto reader = packrec::OpenShardDataset(dir);
  if (!reader.ok()) {
    std::fprintf(stderr, "%s\n", reader.status().ToString().c_str());
    return false;
  }
  packrec::ReadScratch scratch;
  auto view = (*reader)->Read(0, scratch);
  return view.ok() && (*reader)->size() == 1 && view->label == label &&
         view->bytes.size() == size && std::memcmp(view->bytes.data(), payload, size) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const char consumer_payload[] = "consumer payload";
  if (!ReadsBack(argv[1], consumer_payload, sizeof consumer_payload, 4)) return 1;

  const std::filesystem::path own = argv[2];
  auto writer = packrec::CreateShardWriter(own);
  if (!writer.ok()) return 1;
  const char payload[] = "shard-only payload";
  std::vector<std::byte> bytes(sizeof payload);
  std::memcpy(bytes.data(), payload, sizeof payload);
  if (!(*writer)->Add({"k", 7, bytes, {}}).ok() || !(*writer)->Finish({}).ok()) return 1;
  if (!ReadsBack(own, payload, sizeof payload, 7)) return 1;
  std::printf("shard-only consumer OK\n");
  return 0;
}
