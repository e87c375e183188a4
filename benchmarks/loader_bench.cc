// Decode and loader throughput, stage by stage, for benchmarks/loader_bench.sh.
//
//   packrec_loader_bench decode FILE [--seconds S]
//       one thread decoding one JPEG to RGB at full size, again and again (what tjbench measures)
//   packrec_loader_bench decode-only DATASET --transform train|eval [--threads T] [--size N]
//       T threads read and decode every record once (no batches, no buffers): the ceiling
//   packrec_loader_bench loader DATASET --transform train|eval [--threads T] [--batch B]
//                        [--prefetch P] [--size N] [--epochs E]
//       the Loader, E epochs; prints images/s, the consumer's wait and the peak RSS
#include <packrec/decode.h>
#include <packrec/loader.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

long PeakRssKiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

struct Args {
  std::string mode, path, transform = "train";
  unsigned threads = 2;
  std::uint32_t batch = 256, prefetch = 4, size = 224, epochs = 1;
  double seconds = 3;
};

bool Parse(int argc, char** argv, Args* args) {
  if (argc < 3) return false;
  args->mode = argv[1];
  args->path = argv[2];
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--transform") {
      args->transform = value;
    } else if (flag == "--threads") {
      args->threads = static_cast<unsigned>(std::stoul(value));
    } else if (flag == "--batch") {
      args->batch = static_cast<std::uint32_t>(std::stoul(value));
    } else if (flag == "--prefetch") {
      args->prefetch = static_cast<std::uint32_t>(std::stoul(value));
    } else if (flag == "--size") {
      args->size = static_cast<std::uint32_t>(std::stoul(value));
    } else if (flag == "--epochs") {
      args->epochs = static_cast<std::uint32_t>(std::stoul(value));
    } else if (flag == "--seconds") {
      args->seconds = std::stod(value);
    } else {
      return false;
    }
  }
  return true;
}

packrec::LoaderOptions Options(const Args& args) {
  packrec::LoaderOptions options;
  options.batch_size = args.batch;
  options.threads = args.threads;
  options.prefetch_batches = args.prefetch;
  options.output_size = args.size;
  options.resize_size = args.size * 256 / 224;
  options.transform =
      args.transform == "eval" ? packrec::TransformKind::kEval : packrec::TransformKind::kTrain;
  return options;
}

int DecodeOne(const Args& args) {
  std::ifstream in(args.path, std::ios::binary);
  std::vector<char> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto bytes = std::as_bytes(std::span<const char>(file));
  auto info = packrec::ReadImageSize(bytes);
  if (!info.ok()) {
    std::fprintf(stderr, "%s\n", info.status().ToString().c_str());
    return 1;
  }
  packrec::DecodeRequest request;
  request.out_width = info->width;
  request.out_height = info->height;
  std::vector<std::uint8_t> out(std::size_t{info->width} * info->height * 3);
  packrec::DecodeScratch scratch;
  std::uint64_t images = 0;
  const auto start = Clock::now();
  while (Since(start) < args.seconds) {
    const packrec::Status status = packrec::DecodeInto(bytes, request, out, scratch);
    if (!status.ok()) {
      std::fprintf(stderr, "%s\n", status.ToString().c_str());
      return 1;
    }
    ++images;
  }
  const double seconds = Since(start);
  std::printf("mode=decode images_per_s=%.1f mpixels_per_s=%.2f width=%u height=%u\n",
              static_cast<double>(images) / seconds,
              static_cast<double>(images) * info->width * info->height / 1e6 / seconds, info->width,
              info->height);
  return 0;
}

int DecodeOnly(const Args& args) {
  auto opened = packrec::OpenDataset(args.path);
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.status().ToString().c_str());
    return 1;
  }
  const packrec::Reader& reader = **opened;
  const packrec::LoaderOptions options = Options(args);
  std::atomic<std::uint64_t> next{0};
  std::atomic<bool> failed{false};
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < args.threads; ++t) {
    threads.emplace_back([&] {
      packrec::ReadScratch read_scratch;
      packrec::DecodeScratch decode_scratch;
      std::vector<std::uint8_t> out(std::size_t{args.size} * args.size * 3);
      for (std::uint64_t i; (i = next.fetch_add(1)) < reader.size();) {
        auto view = reader.Read(i, read_scratch);
        if (!view.ok()) {
          failed = true;
          return;
        }
        bool flip = false;
        packrec::DecodeRequest request;
        request.out_width = request.out_height = args.size;
        request.region = [&](std::uint32_t w, std::uint32_t h) {
          return options.transform == packrec::TransformKind::kEval
                     ? packrec::EvalRegion(w, h, options)
                     : packrec::TrainRegion(w, h, options, 0, i, &flip);
        };
        if (!packrec::DecodeInto(view->bytes, request, out, decode_scratch).ok()) failed = true;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const double seconds = Since(start);
  if (failed) return 1;
  std::printf("mode=decode-only transform=%s threads=%u images_per_s=%.1f seconds=%.3f\n",
              args.transform.c_str(), args.threads, static_cast<double>(reader.size()) / seconds,
              seconds);
  return 0;
}

int RunLoader(const Args& args) {
  auto opened = packrec::OpenDataset(args.path);
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.status().ToString().c_str());
    return 1;
  }
  std::shared_ptr<const packrec::Reader> reader(std::move(*opened));
  const packrec::LoaderOptions options = Options(args);
  auto loader = packrec::Loader::Create(reader, options);
  if (!loader.ok()) {
    std::fprintf(stderr, "%s\n", loader.status().ToString().c_str());
    return 1;
  }
  std::uint64_t images = 0;
  std::uint64_t checksum = 0;
  const auto start = Clock::now();
  for (std::uint32_t epoch = 0; epoch < args.epochs; ++epoch) {
    if (epoch > 0) (*loader)->StartEpoch(epoch);
    for (;;) {
      auto batch = (*loader)->Next();
      if (!batch.ok()) {
        std::fprintf(stderr, "%s\n", batch.status().ToString().c_str());
        return 1;
      }
      if (*batch == nullptr) break;
      images += (*batch)->size();
      checksum += (*batch)->images()[0];  // the consumer touches the batch
    }
  }
  const double seconds = Since(start);
  const packrec::LoaderStats stats = (*loader)->stats();
  const double batch_mib = static_cast<double>(args.batch) * args.size * args.size * 3 / 1048576.0;
  std::printf(
      "mode=loader transform=%s threads=%u batch=%u prefetch=%u images_per_s=%.1f "
      "seconds=%.3f consumer_wait_s=%.3f peak_rss_mib=%.1f rss_budget_mib=%.1f sink=%llu\n",
      args.transform.c_str(), args.threads, args.batch, args.prefetch,
      static_cast<double>(images) / seconds, seconds, stats.consumer_wait_seconds,
      static_cast<double>(PeakRssKiB()) / 1024.0, args.prefetch * batch_mib + 100,
      static_cast<unsigned long long>(checksum % 2));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!Parse(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: packrec_loader_bench decode FILE [--seconds S]\n"
                 "       packrec_loader_bench decode-only DATASET [--transform train|eval] "
                 "[--threads T] [--size N]\n"
                 "       packrec_loader_bench loader DATASET [--transform train|eval] "
                 "[--threads T] [--batch B] [--prefetch P] [--size N] [--epochs E]\n");
    return 2;
  }
  if (args.mode == "decode") return DecodeOne(args);
  if (args.mode == "decode-only") return DecodeOnly(args);
  if (args.mode == "loader") return RunLoader(args);
  std::fprintf(stderr, "unknown mode %s\n", args.mode.c_str());
  return 2;
}
