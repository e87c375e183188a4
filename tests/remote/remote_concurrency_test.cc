// A shard dataset read over HTTP (Debian's nginx, started here on 127.0.0.1) by many threads at
// once, with and without the disk cache, while batches are announced (WillNeed) and readers are
// destroyed with fetches in flight: the C++ side of the remote path, for the sanitizer jobs
// (the Python suites test the same path through the CLI and the bindings). Skipped when nginx is
// not installed.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "../formats/shard_test_util.h"
#include "core/checksum.h"
#include "packrec/convert.h"
#include "packrec/reader.h"
#include "test_util.h"

namespace packrec {
namespace {

namespace fs = std::filesystem;

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t size = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  ::close(fd);
  return ntohs(address.sin_port);
}

bool Accepts(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return connected;
}

// nginx serving `root` on 127.0.0.1 until destroyed; url() is empty when it could not start.
class Nginx {
 public:
  Nginx(const fs::path& root, const fs::path& work) {
    const fs::path binary = "/usr/sbin/nginx";
    if (!fs::exists(binary)) return;
    fs::create_directories(work / "temp");
    const int port = FreePort();
    const fs::path config = work / "nginx.conf";
    std::ofstream(config) << "daemon off;\n"
                          << (::geteuid() == 0 ? "user root;\n" : "") << "worker_processes 1;\n"
                          << "pid " << (work / "nginx.pid").string() << ";\n"
                          << "error_log " << (work / "error.log").string() << ";\n"
                          << "events {}\nhttp {\n  access_log off;\n"
                          << "  client_body_temp_path " << (work / "temp").string() << ";\n"
                          << "  proxy_temp_path " << (work / "temp").string() << ";\n"
                          << "  fastcgi_temp_path " << (work / "temp").string() << ";\n"
                          << "  uwsgi_temp_path " << (work / "temp").string() << ";\n"
                          << "  scgi_temp_path " << (work / "temp").string() << ";\n"
                          << "  keepalive_requests 100000;\n"
                          << "  server { listen 127.0.0.1:" << port << "; root " << root.string()
                          << "; }\n}\n";
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execl(binary.c_str(), binary.c_str(), "-c", config.c_str(), "-p", work.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 200 && !Accepts(port); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    if (Accepts(port)) url_ = "http://127.0.0.1:" + std::to_string(port);
  }
  ~Nginx() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  Nginx(const Nginx&) = delete;
  Nginx& operator=(const Nginx&) = delete;
  const std::string& url() const { return url_; }

 private:
  pid_t pid_ = -1;
  std::string url_;
};

std::uint64_t Fingerprint(const RecordView& record) {
  return Xxh64(record.bytes) ^ (std::uint64_t{record.label} << 56);
}

TEST_CASE("8 threads reading a dataset at a URL while batches are announced: every record right") {
  test::TempDir dir;
  test::SynthTree(dir / "tree", 3, 40, /*seed=*/21, /*size=*/96);
  ConvertOptions convert;
  convert.source = dir / "tree";
  convert.output = dir / "www" / "ds.pkr";
  convert.writer.shard_size_bytes = 64 << 10;  // several shards
  REQUIRE(Convert(convert).ok());
  const Nginx nginx(dir / "www", dir / "nginx");
  if (nginx.url().empty()) {
    MESSAGE("skipped: nginx is not installed or did not start");
    return;
  }
  auto local = OpenDataset(convert.output);
  REQUIRE(local.ok());
  const std::uint64_t count = (*local)->size();
  std::vector<std::uint64_t> expected(count);
  ReadScratch local_scratch;
  for (std::uint64_t i = 0; i < count; ++i) {
    auto record = (*local)->Read(i, local_scratch);
    REQUIRE(record.ok());
    expected[i] = Fingerprint(*record);
  }
  for (const bool cached : {false, true}) {
    CAPTURE(cached);
    OpenOptions options;
    if (cached) {
      options.remote.cache_dir = (dir / "cache").string();
      options.remote.cache_size_bytes = 256 << 10;  // smaller than the dataset: evictions too
      options.remote.cache_block_bytes = 32 << 10;
    }
    auto remote = OpenDataset(nginx.url() + "/ds.pkr", options);
    REQUIRE(remote.ok());
    REQUIRE((*remote)->size() == count);
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        ReadScratch scratch;
        std::mt19937_64 random(static_cast<std::uint64_t>(t) * 104729 + 1);
        for (int n = 0; n < 60; ++n) {
          if (t % 2 == 0 && n % 10 == 0) {  // half the threads announce a batch first
            std::vector<std::uint64_t> batch(16);
            for (std::uint64_t& index : batch) index = random() % count;
            (*remote)->WillNeed(batch);
          }
          const std::uint64_t i = random() % count;
          auto record = (*remote)->Read(i, scratch);
          if (!record.ok() || Fingerprint(*record) != expected[i]) ++wrong;
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    CHECK(wrong == 0);
    CHECK((*remote)->remote_stats().requests > 0);
    if (cached) CHECK((*remote)->remote_stats().cache_fills > 0);
  }
  // A reader destroyed with announced batches still being fetched: cancelled, nothing leaks.
  for (int round = 0; round < 5; ++round) {
    auto remote = OpenDataset(nginx.url() + "/ds.pkr");
    REQUIRE(remote.ok());
    std::vector<std::uint64_t> all(count);
    for (std::uint64_t i = 0; i < count; ++i) all[i] = i;
    (*remote)->WillNeed(all);
  }
}

}  // namespace
}  // namespace packrec
