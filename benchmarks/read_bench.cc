// Sequential read of every record of a dataset through the public Reader, the way a loader's
// I/O stage sees it. With checksums on (the default) every byte is hashed; with --no-verify every
// byte is still touched (summed), so the page cache or the disk must deliver all of it.
#include <packrec/reader.h>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

// The in-process baseline: what `cat` does (read() into one 128 KiB buffer, as coreutils' cat
// does on Linux), without a process to start, so it compares with the read loop alone. Like the
// --no-verify consumer it touches one byte per cache line.
int RawRead(int argc, char** argv) {
  std::vector<char> buffer(128 << 10);
  std::uint64_t bytes = 0;
  std::uint64_t sink = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 2; i < argc; ++i) {
    const int fd = ::open(argv[i], O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      std::perror(argv[i]);
      return 1;
    }
    for (ssize_t n; (n = ::read(fd, buffer.data(), buffer.size())) > 0;) {
      for (ssize_t j = 0; j < n; j += 64) sink += static_cast<unsigned char>(buffer[j]);
      bytes += static_cast<std::uint64_t>(n);
    }
    ::close(fd);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("bytes=%llu seconds=%.4f MBps=%.1f sink=%llu\n",
              static_cast<unsigned long long>(bytes), seconds,
              static_cast<double>(bytes) / 1e6 / seconds,
              static_cast<unsigned long long>(sink % 2));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: packrec_read_bench DATASET [--no-verify] [--repeat N]\n"
                 "       packrec_read_bench --raw FILE...   (read() loop, the cat baseline)\n");
    return 2;
  }
  if (std::strcmp(argv[1], "--raw") == 0) return RawRead(argc, argv);
  packrec::OpenOptions options;
  int repeat = 1;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no-verify") == 0) options.verify_checksums = false;
    if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) repeat = std::stoi(argv[++i]);
  }
  const auto open_start = std::chrono::steady_clock::now();
  auto reader = packrec::OpenDataset(argv[1], options);
  const double open_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - open_start).count();
  if (!reader.ok()) {
    std::fprintf(stderr, "%s\n", reader.status().ToString().c_str());
    return 1;
  }
  double best_seconds = 1e30;
  std::uint64_t bytes = 0;
  std::uint64_t sink = 0;
  for (int r = 0; r < repeat; ++r) {
    bytes = 0;
    const auto start = std::chrono::steady_clock::now();
    packrec::Status status = (*reader)->ForEach([&](const packrec::RecordView& view) {
      bytes += view.bytes.size();
      if (!options.verify_checksums) {
        for (std::size_t i = 0; i < view.bytes.size(); i += 64) {
          sink += static_cast<std::uint64_t>(view.bytes[i]);
        }
      }
      return packrec::Status::OK();
    });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!status.ok()) {
      std::fprintf(stderr, "%s\n", status.ToString().c_str());
      return 1;
    }
    best_seconds = std::min(best_seconds, seconds);
  }
  std::printf(
      "records=%llu bytes=%llu seconds=%.4f MBps=%.1f records_per_s=%.0f open_seconds=%.4f "
      "sink=%llu\n",
      static_cast<unsigned long long>((*reader)->size()), static_cast<unsigned long long>(bytes),
      best_seconds, static_cast<double>(bytes) / 1e6 / best_seconds,
      static_cast<double>((*reader)->size()) / best_seconds, open_seconds,
      static_cast<unsigned long long>(sink % 2));
  return 0;
}
