// Access rows for a dataset at a URL: what one request costs (its latency, read one record at a
// time), and what the loader's way of reading gets, a batch of records announced at once
// (Reader::WillNeed: sorted, coalesced, fetched with many requests in flight), at random and in
// order. The page-cache rows of local datasets mean nothing here; these take their place.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "bench/bench_internal.h"

namespace packrec::bench {
namespace {

AccessMeasurement NetworkRow(const Source& source, const char* order, const char* engine,
                             unsigned concurrency) {
  AccessMeasurement row;
  row.source = source.kind();
  row.path = source.path().string();
  row.order = order;
  row.cache = "network";
  row.engine = engine;
  row.concurrency = concurrency;
  return row;
}

void Finish(AccessMeasurement& row, double seconds, std::uint64_t requests) {
  row.seconds = seconds;
  row.records_per_s = seconds > 0 ? static_cast<double>(row.records) / seconds : 0;
  row.mb_per_s = seconds > 0 ? static_cast<double>(row.bytes) / 1e6 / seconds : 0;
  row.requests = requests;
}

// One record per request, one request at a time: the latency a read on demand pays.
Result<AccessMeasurement> OneAtATime(const Source& source, const Plan& plan) {
  AccessMeasurement row = NetworkRow(source, "random", "request", 1);
  const std::uint64_t n = std::min<std::uint64_t>(plan.options.quick ? 16 : 64, source.size());
  const std::vector<std::uint64_t> records = RandomRecords(source.size(), n, 0x1a7e);
  const Reader& reader = *source.reader();
  const std::uint64_t requests_before = reader.remote_stats().requests;
  std::vector<double> latencies_ms;
  std::vector<std::byte> buffer;
  ReadScratch scratch;
  std::uint64_t sink = 0;
  const Deadline deadline(plan.max_seconds);
  const auto start = Clock::now();
  for (const std::uint64_t index : records) {
    if (!latencies_ms.empty() && deadline.passed()) break;
    const auto before = Clock::now();
    PACKREC_ASSIGN_OR_RETURN(const std::uint64_t bytes,
                             source.ReadOne(index, buffer, scratch, sink));
    latencies_ms.push_back(SecondsSince(before) * 1000);
    ++row.records;
    row.bytes += bytes;
  }
  Finish(row, SecondsSince(start), reader.remote_stats().requests - requests_before);
  std::nth_element(latencies_ms.begin(), latencies_ms.begin() + latencies_ms.size() / 2,
                   latencies_ms.end());
  row.request_latency_ms = latencies_ms[latencies_ms.size() / 2];
  (void)sink;
  return row;
}

// Batches announced whole, as the Loader announces them, then read.
Result<AccessMeasurement> Batches(const Source& source, const Plan& plan, bool sequential) {
  const std::uint64_t batch = std::min<std::uint64_t>(plan.options.batch_size, source.size());
  AccessMeasurement row = NetworkRow(source, sequential ? "sequential" : "random", "coalesced",
                                     static_cast<unsigned>(batch));
  const std::uint64_t n = std::max(plan.max_records, batch);
  const std::vector<std::uint64_t> records =
      sequential ? SequentialRecords(source.size(), n) : RandomRecords(source.size(), n, 0xba7c);
  const Reader& reader = *source.reader();
  const std::uint64_t requests_before = reader.remote_stats().requests;
  std::vector<std::byte> buffer;
  ReadScratch scratch;
  std::uint64_t sink = 0;
  const Deadline deadline(plan.max_seconds);
  const auto start = Clock::now();
  for (std::size_t first = 0; first < records.size(); first += batch) {
    if (first > 0 && deadline.passed()) break;
    const std::span<const std::uint64_t> indices(
        records.data() + first, std::min<std::size_t>(batch, records.size() - first));
    reader.WillNeed(indices);
    for (const std::uint64_t index : indices) {
      PACKREC_ASSIGN_OR_RETURN(const std::uint64_t bytes,
                               source.ReadOne(index, buffer, scratch, sink));
      ++row.records;
      row.bytes += bytes;
    }
  }
  Finish(row, SecondsSince(start), reader.remote_stats().requests - requests_before);
  (void)sink;
  return row;
}

}  // namespace

Result<std::vector<AccessMeasurement>> MeasureNetworkAccess(const Source& source, const Plan& plan,
                                                            const BenchProgress& progress) {
  std::vector<AccessMeasurement> rows;
  if (progress) progress(source.kind() + " at a URL: random, one request at a time");
  PACKREC_ASSIGN_OR_RETURN(AccessMeasurement single, OneAtATime(source, plan));
  rows.push_back(std::move(single));
  for (const bool sequential : {false, true}) {
    if (progress) {
      progress(source.kind() + " at a URL: " + (sequential ? "sequential" : "random") +
               " batches of " + std::to_string(plan.options.batch_size) + ", coalesced");
    }
    PACKREC_ASSIGN_OR_RETURN(AccessMeasurement row, Batches(source, plan, sequential));
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace packrec::bench
