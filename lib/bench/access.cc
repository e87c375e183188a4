// Access patterns: how fast each way of holding the data hands its bytes over, by order (on-disk
// sequence, or random as a shuffled epoch reads), page-cache state and number of readers. Checksums
// are off here (the storage question); the loader's stages pay for them.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>

#include "bench/bench_internal.h"
#include "core/file_io.h"
#include "core/random.h"
#include "packrec/reader.h"

namespace packrec::bench {
namespace {

namespace fs = std::filesystem;

// Every touched byte ends up here, so the compiler cannot drop the reads that produced it.
std::atomic<std::uint64_t> g_sink{0};

// Thrown away by the measurement loops: a flag that a visitor asked ForEach to stop.
Status DeadlineStop() { return Status::OutOfRange("bench: time is up"); }

using Tally = IoCount;

}  // namespace

// `readers` threads over `records`: contiguous slices read in order (sequential), or one shared
// cursor over the list (random).
Result<IoCount> ReadRecords(const Source& source, const std::vector<std::uint64_t>& records,
                            bool sequential, unsigned readers, double max_seconds) {
  std::atomic<std::uint64_t> cursor{0};
  std::atomic<std::uint64_t> total_records{0}, total_bytes{0};
  std::vector<Status> errors(readers);
  const Deadline deadline(max_seconds);
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < readers; ++t) {
    threads.emplace_back([&, t] {
      std::uint64_t done = 0, bytes = 0, local_sink = 0;
      if (sequential) {
        const std::uint64_t n = records.size();
        errors[t] = source.ReadRange(n * t / readers, n * (t + 1) / readers, deadline, done, bytes,
                                     local_sink);
      } else {
        std::vector<std::byte> buffer;
        ReadScratch scratch;
        for (std::uint64_t i;
             (done == 0 || !deadline.passed()) && (i = cursor.fetch_add(1)) < records.size();) {
          Result<std::uint64_t> got = source.ReadOne(records[i], buffer, scratch, local_sink);
          if (!got.ok()) {
            errors[t] = got.status();
            break;
          }
          ++done;
          bytes += *got;
        }
      }
      total_records += done;
      total_bytes += bytes;
      g_sink += local_sink;
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const Status& error : errors) PACKREC_RETURN_IF_ERROR(error);
  return Tally{total_records, total_bytes, SecondsSince(start)};
}

namespace {

AccessMeasurement Row(const Source& source, const char* order, bool cold, const char* engine,
                      unsigned concurrency, const Tally& tally, const StorageProbe& probe) {
  AccessMeasurement row;
  row.source = source.kind();
  row.path = source.path().string();
  row.order = order;
  row.cache = cold ? "cold" : "warm";
  row.engine = engine;
  row.concurrency = concurrency;
  row.records = tally.requests;
  row.bytes = tally.bytes;
  row.seconds = tally.seconds;
  if (tally.seconds > 0) {
    row.records_per_s = static_cast<double>(tally.requests) / tally.seconds;
    row.mb_per_s = static_cast<double>(tally.bytes) / 1e6 / tally.seconds;
  }
  if (probe.ran && probe.sequential_mb_per_s > 0) {
    row.device_bandwidth_share = row.mb_per_s / probe.sequential_mb_per_s;
  }
  return row;
}

// Whether the rows of this cache state are measured: cold unless --no-cold; warm unless on
// emulated storage, where warm rows never reach the device and their untimed filling pass would
// read every selected record through the throttle (20,000 loose files at 100 reads/s: 5 minutes).
bool MeasuredCache(const Plan& plan, bool cold) {
  return cold ? plan.options.cold_cache : plan.options.storage_emulation == nullptr;
}

// Shards through io_uring: the records' byte ranges (Reader::Locate) read `depth` at a time.
Status MeasureUring(Source& source, const Plan& plan, const std::vector<std::uint64_t>& records,
                    const StorageProbe& probe, const BenchProgress& progress,
                    std::vector<AccessMeasurement>& rows) {
  std::map<fs::path, std::unique_ptr<ScopedFd>> files;
  std::vector<IoRequest> requests;
  requests.reserve(records.size());
  for (const std::uint64_t index : records) {
    PACKREC_ASSIGN_OR_RETURN(const RecordLocation where, source.reader()->Locate(index));
    auto& fd = files[where.file];
    if (fd == nullptr) {
      fd = std::make_unique<ScopedFd>(::open(where.file.c_str(), O_RDONLY | O_CLOEXEC));
      if (fd->get() < 0) return ErrnoStatus("open", where.file, errno);
    }
    requests.push_back({fd->get(), where.offset, static_cast<std::uint32_t>(where.stored_size)});
  }
  for (const bool cold : {true, false}) {
    if (!MeasuredCache(plan, cold)) continue;
    for (const unsigned depth : plan.queue_depths) {
      if (progress) {
        progress(source.kind() + ": random, " + (cold ? "cold" : "warm") + ", io_uring depth " +
                 std::to_string(depth));
      }
      PACKREC_ASSIGN_OR_RETURN(const std::optional<CacheEviction> eviction,
                               MakeCold(source, records, plan, cold));
      PACKREC_ASSIGN_OR_RETURN(const std::optional<DeviceReads> before, DeviceReadsNow(plan));
      PACKREC_ASSIGN_OR_RETURN(const IoCount count,
                               UringRead(requests, depth, Deadline(plan.device_seconds)));
      PACKREC_ASSIGN_OR_RETURN(const std::optional<DeviceReads> after, DeviceReadsNow(plan));
      AccessMeasurement row = Row(source, "random", cold, "io_uring", depth,
                                  Tally{count.requests, count.bytes, count.seconds}, probe);
      row.eviction = eviction;
      if (cold) row.device_reads = ReadsBetween(before, after);
      rows.push_back(std::move(row));
    }
  }
  return Status::OK();
}

// One row of reads on `readers` threads. Warm: the fastest of three passes (the cache is as warm
// as it gets; noise only slows). Cold: the median of plan.repeats passes, each after its own
// eviction, every pass's records/s in `runs` (the format advice compares formats beyond their
// spread); once on emulated storage, whose throttle repeats itself.
Result<AccessMeasurement> MeasureThreads(Source& source, const Plan& plan,
                                         const std::vector<std::uint64_t>& records, bool sequential,
                                         bool cold, unsigned readers, const StorageProbe& probe) {
  const unsigned passes = !cold                                       ? 3
                          : plan.options.storage_emulation != nullptr ? 1
                                                                      : std::max(plan.repeats, 1u);
  std::vector<std::pair<Tally, std::optional<CacheEviction>>> runs;
  std::optional<DeviceReads> device_reads;
  for (unsigned pass = 0; pass < passes; ++pass) {
    PACKREC_ASSIGN_OR_RETURN(const std::optional<CacheEviction> eviction,
                             MakeCold(source, records, plan, cold));
    PACKREC_ASSIGN_OR_RETURN(const std::optional<DeviceReads> before, DeviceReadsNow(plan));
    PACKREC_ASSIGN_OR_RETURN(
        const Tally run, ReadRecords(source, records, sequential, readers, plan.device_seconds));
    PACKREC_ASSIGN_OR_RETURN(const std::optional<DeviceReads> after, DeviceReadsNow(plan));
    if (cold) device_reads = ReadsBetween(before, after);
    runs.emplace_back(run, eviction);
  }
  const auto rate = [](const Tally& t) {
    return t.seconds > 0 ? static_cast<double>(t.requests) / t.seconds : 0.0;
  };
  std::sort(runs.begin(), runs.end(),
            [&](const auto& a, const auto& b) { return rate(a.first) < rate(b.first); });
  // The median; of an even count the lower middle one (two runs: the slower, the cautious figure).
  const auto& [tally, eviction] = cold ? runs[(runs.size() - 1) / 2] : runs.back();
  AccessMeasurement row =
      Row(source, sequential ? "sequential" : "random", cold, "threads", readers, tally, probe);
  row.eviction = eviction;
  row.device_reads = device_reads;
  if (cold && runs.size() > 1) {
    for (const auto& run : runs) row.runs.push_back(rate(run.first));
  }
  return row;
}

}  // namespace

Result<std::optional<CacheEviction>> MakeCold(Source& source,
                                              const std::vector<std::uint64_t>& records,
                                              const Plan& plan, bool cold) {
  if (!cold) return std::optional<CacheEviction>();
  PACKREC_ASSIGN_OR_RETURN(CacheEviction eviction, source.Evict(records));
  if (plan.options.storage_emulation != nullptr) {
    PACKREC_RETURN_IF_ERROR(plan.options.storage_emulation->DropMetadataCaches());
  }
  return std::optional<CacheEviction>(eviction);
}

Result<std::optional<DeviceReads>> DeviceReadsNow(const Plan& plan) {
  if (plan.options.storage_emulation == nullptr) return std::optional<DeviceReads>();
  PACKREC_ASSIGN_OR_RETURN(const DeviceReads reads, plan.options.storage_emulation->Reads());
  return std::optional<DeviceReads>(reads);
}

std::optional<DeviceReads> ReadsBetween(const std::optional<DeviceReads>& before,
                                        const std::optional<DeviceReads>& after) {
  if (!before || !after) return std::nullopt;
  return DeviceReads{after->requests - before->requests, after->bytes - before->bytes};
}

std::uint64_t TouchBytes(std::span<const std::byte> bytes) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < bytes.size(); i += 64) sum += static_cast<std::uint64_t>(bytes[i]);
  return sum;
}

Status Source::OpenReader() {
  OpenOptions options;
  options.verify_checksums = false;
  PACKREC_ASSIGN_OR_RETURN(std::unique_ptr<Reader> reader, OpenDataset(path_, options));
  reader_ = std::move(reader);
  return Status::OK();
}

Result<std::unique_ptr<Source>> Source::Open(const fs::path& input) {
  auto source = std::unique_ptr<Source>(new Source);
  source->path_ = input;
  const Status opened = source->OpenReader();
  if (opened.ok()) {
    source->kind_ = source->reader_->info().format;
    // At a URL there are no local files to read with io_uring or to evict.
    if (IsDatasetUrl(input.string())) return source;
    source->locates_records_ = source->reader_->size() > 0 && source->reader_->Locate(0).ok();
    std::error_code error;
    const fs::path dir = fs::is_directory(input, error) ? input : input.parent_path();
    for (const DatasetFileInfo& file : source->reader_->info().files) {
      source->dataset_files_.push_back(dir / file.file);
    }
    return source;
  }
  std::error_code error;
  if (opened.code() != StatusCode::kNotFound || !fs::is_directory(input, error)) return opened;
  Result<SourceListing> listing = ListImageFolder(input);
  if (!listing.ok()) {
    return Status::InvalidInput(
        input.string() +
        " is neither a packrec dataset nor an image folder: " + listing.status().message());
  }
  if (listing->items.empty()) {
    return Status::InvalidInput(input.string() + ": no image files under its class folders");
  }
  source->kind_ = "files";
  source->listing_ = std::move(listing).value();
  return source;
}

std::uint64_t Source::size() const {
  return reader_ != nullptr ? reader_->size() : listing_.items.size();
}

Result<CacheEviction> Source::Evict(const std::vector<std::uint64_t>& records) {
  if (kind_ == "files") {
    std::vector<fs::path> files;
    for (const std::uint64_t index : records) files.push_back(listing_.items[index].path);
    return EvictFromPageCache(files);
  }
  reader_.reset();
  Result<CacheEviction> eviction = EvictFromPageCache(dataset_files_);
  PACKREC_RETURN_IF_ERROR(OpenReader());
  return eviction;
}

Result<std::uint64_t> Source::ReadOne(std::uint64_t index, std::vector<std::byte>& buffer,
                                      ReadScratch& scratch, std::uint64_t& sink) const {
  if (reader_ != nullptr) {
    PACKREC_ASSIGN_OR_RETURN(const RecordView view, reader_->Read(index, scratch));
    sink += TouchBytes(view.bytes);
    return view.bytes.size();
  }
  // What a loader over loose files does per sample: open, size, read, close.
  const fs::path& path = listing_.items[index].path;
  const ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus("open", path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("fstat", path, errno);
  buffer.resize(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (done < buffer.size()) {
    const ssize_t n = ::read(fd.get(), buffer.data() + done, buffer.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read", path, errno);
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  sink += TouchBytes(std::span<const std::byte>(buffer.data(), done));
  return done;
}

Status Source::ReadRange(std::uint64_t begin, std::uint64_t end, const Deadline& deadline,
                         std::uint64_t& records, std::uint64_t& bytes, std::uint64_t& sink) const {
  if (reader_ == nullptr) {
    std::vector<std::byte> buffer;
    ReadScratch scratch;
    for (std::uint64_t i = begin; i < end && (records == 0 || !deadline.passed()); ++i) {
      PACKREC_ASSIGN_OR_RETURN(const std::uint64_t got, ReadOne(i, buffer, scratch, sink));
      ++records;
      bytes += got;
    }
    return Status::OK();
  }
  bool stopped = false;
  const Status status = reader_->ForEach(
      [&](const RecordView& view) {
        if (records > 0 && deadline.passed()) {
          stopped = true;
          return DeadlineStop();
        }
        sink += TouchBytes(view.bytes);
        ++records;
        bytes += view.bytes.size();
        return Status::OK();
      },
      begin, end);
  return stopped ? Status::OK() : status;
}

Result<std::vector<std::byte>> Source::Copy(std::uint64_t index) const {
  if (reader_ == nullptr) return ReadWholeFile(listing_.items[index].path);
  ReadScratch scratch;
  PACKREC_ASSIGN_OR_RETURN(const RecordView view, reader_->Read(index, scratch));
  return std::vector<std::byte>(view.bytes.begin(), view.bytes.end());
}

std::vector<std::uint64_t> SequentialRecords(std::uint64_t size, std::uint64_t n) {
  std::vector<std::uint64_t> records(std::min(size, n));
  for (std::uint64_t i = 0; i < records.size(); ++i) records[i] = i;
  return records;
}

std::vector<std::uint64_t> RandomRecords(std::uint64_t size, std::uint64_t n, std::uint64_t seed) {
  // A partial Fisher-Yates shuffle: the first n of a random permutation.
  std::vector<std::uint64_t> all = SequentialRecords(size, size);
  SplitMix64 random(seed);
  const std::uint64_t count = std::min(size, n);
  for (std::uint64_t i = 0; i < count; ++i) {
    std::swap(all[i], all[i + random.Below(size - i)]);
  }
  all.resize(count);
  return all;
}

Result<std::vector<AccessMeasurement>> MeasureAccess(Source& source, const Plan& plan,
                                                     const StorageProbe& probe,
                                                     const BenchProgress& progress) {
  std::vector<AccessMeasurement> rows;
  const std::uint64_t n = plan.max_records;
  for (const bool sequential : {true, false}) {
    const std::vector<std::uint64_t> records =
        sequential ? SequentialRecords(source.size(), n) : RandomRecords(source.size(), n, 0x5eed);
    const char* order = sequential ? "sequential" : "random";
    for (const bool cold : {true, false}) {
      if (!MeasuredCache(plan, cold)) continue;
      if (!cold) {
        // Warm: one untimed pass puts the selection in the page cache.
        PACKREC_RETURN_IF_ERROR(ReadRecords(source, records, sequential, 1, 1e9).status());
      }
      for (const unsigned readers : plan.readers) {
        if (progress) {
          progress(source.kind() + ": " + order + ", " + (cold ? "cold" : "warm") + ", " +
                   std::to_string(readers) + (readers == 1 ? " reader" : " readers"));
        }
        PACKREC_ASSIGN_OR_RETURN(
            AccessMeasurement row,
            MeasureThreads(source, plan, records, sequential, cold, readers, probe));
        rows.push_back(std::move(row));
      }
    }
    if (!sequential && source.locates_records() && plan.uring_unavailable.empty()) {
      PACKREC_RETURN_IF_ERROR(MeasureUring(source, plan, records, probe, progress, rows));
    }
  }
  return rows;
}

}  // namespace packrec::bench
