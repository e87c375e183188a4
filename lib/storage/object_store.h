// Datasets at URLs: https:// and http:// through libcurl, s3:// through libcurl's own AWS SigV4
// signing (path-style requests to AWS_ENDPOINT_URL, or to AWS's regional endpoint). Credentials
// and region come the way AWS's tools take them: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN, AWS_REGION / AWS_DEFAULT_REGION, else the profile AWS_PROFILE (or
// "default") of ~/.aws/credentials and ~/.aws/config (AWS_SHARED_CREDENTIALS_FILE,
// AWS_CONFIG_FILE). No credentials: unsigned requests, for public buckets.
//
// Reads are GETs of byte ranges (or of whole small objects); failures that may pass
// (connection reset or refused, timeouts, HTTP 5xx and 429, a short body) are retried with
// exponential backoff and jitter, up to RemoteOptions::max_tries. Anything else (404, 403, a
// server that ignores Range) fails at once. Errors name the URL and the byte range.
//
// Threading: an ObjectStore is safe to use from any number of threads; connections are shared
// (kept alive and reused) across them. fork(): a child must open its own ObjectStore (libcurl's
// connections are not fork-safe); a Reader opened in the parent reopens its store in the child
// on first use.
#ifndef PACKREC_LIB_STORAGE_OBJECT_STORE_H_
#define PACKREC_LIB_STORAGE_OBJECT_STORE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "packrec/reader.h"
#include "packrec/status.h"

namespace packrec {

class RandomAccessFile;

// IsDatasetUrl (packrec/reader.h), by its name inside the library.
inline bool IsRemoteUrl(std::string_view path) { return IsDatasetUrl(path); }

// An http(s):// or s3:// URL, split once for every caller (the stores, import globs, merge's
// parts). Trailing '/' dropped. For s3://: the bucket and the key under it (no leading or
// trailing '/'; empty for the bucket itself).
struct ParsedUrl {
  std::string text;  // the URL, without trailing '/'
  bool s3 = false;
  std::string bucket;  // s3 only
  std::string key;     // s3 only; "" names the bucket
  // "s3://bucket".
  std::string BucketUrl() const { return "s3://" + bucket; }
  // The prefix of the objects under the key: "key/", or "" for the bucket.
  std::string KeyPrefix() const { return key.empty() ? std::string() : key + "/"; }
};
// InvalidArgument naming `url` when it is no http(s):// or s3:// URL, or an s3:// one without
// a bucket.
Result<ParsedUrl> ParseUrl(std::string_view url);

class ObjectStore {
 public:
  // The store for the dataset at `url` (its "directory"); names are resolved against it.
  static Result<std::shared_ptr<ObjectStore>> ForUrl(std::string_view url,
                                                     const RemoteOptions& options);
  ~ObjectStore();
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;

  // The dataset's URL as the user gave it, and the URL of `name` inside it (for messages).
  const std::string& url() const { return url_; }
  std::string NameUrl(std::string_view name) const;

  // The whole object `name`. NotFound when the server says 404.
  Result<std::vector<std::byte>> Get(std::string_view name) const;

  // One byte range of one object, fetched into `out` (out.size() bytes from `offset`).
  struct Range {
    std::string name;
    std::uint64_t offset = 0;
    std::span<std::byte> out;
  };
  // Fetches every range, up to max_in_flight at once on shared connections, each retried on its
  // own. Returns OK when all arrived, else the error of the first range that failed for good.
  // `cancel`, when given and set, ends the fetch within about 100 ms with an error (a reader
  // being destroyed does not wait out a stalled server's timeouts).
  Status Fetch(std::span<const Range> ranges, const std::atomic<bool>* cancel = nullptr) const;

  // Writing, to s3:// URLs only (NotSupported for http(s), which has no standard upload). Each
  // call retries as reads do (PUTs and DELETEs are idempotent; a multipart upload retries part by
  // part) and names the object in its errors.
  //
  // What packrec knows of a stored object: its size and the xxh64 packrec stored beside it as
  // x-amz-meta-packrec-xxh64 (empty when not written by packrec).
  struct ObjectHead {
    std::uint64_t size = 0;
    std::string xxh64;        // x-amz-meta-packrec-xxh64 (packrec's uploads), else empty
    std::string etag;         // as the server sent it (quotes included)
    std::string content_md5;  // base64, when the server sends one
  };
  // OK for an s3:// store; NotSupported, naming the URL, for http(s).
  Status CheckWritable() const;
  // nullopt when there is no such object.
  Result<std::optional<ObjectHead>> Head(std::string_view name) const;
  // One PUT of `bytes` as object `name`; `xxh64` (hex, may be empty) is stored as its metadata.
  Status Put(std::string_view name, std::span<const std::byte> bytes,
             std::string_view xxh64 = {}) const;
  // The file as object `name`: one PUT up to kMultipartPartBytes, else a multipart upload (parts
  // of kMultipartPartBytes, 4 in flight): the object appears whole at the end or not at all. A
  // failed multipart upload is aborted (its parts deleted) before the error returns.
  static constexpr std::uint64_t kMultipartPartBytes = 16ull << 20;
  Status PutFile(std::string_view name, const std::filesystem::path& file,
                 std::string_view xxh64) const;
  // Deletes object `name`; OK when it was not there.
  Status Delete(std::string_view name) const;
  // s3:// stores: deletes every object whose name starts with `prefix` (ListKeys, then DELETE
  // each). An empty prefix is refused: it would empty the store.
  Status DeletePrefix(std::string_view prefix) const;

  // Object `name` copied to the local file `file` (created), in ranged GETs of 8 MiB, up to 8 in
  // flight: large objects (a WebDataset tar) never sit whole in memory.
  // Where the server says what the object hashes to (packrec's xxh64 metadata, S3's ETag of a
  // single-part upload, Content-MD5), the copy is checked against it and fetched again when it
  // differs; Corruption naming the URL after three tries.
  Status Download(std::string_view name, const std::filesystem::path& file) const;
  // s3:// stores made for a bucket (s3://bucket): the keys that start with `prefix`, in S3's
  // order (ListObjectsV2, every page). NotSupported for http(s), which has no listing.
  Result<std::vector<std::string>> ListKeys(std::string_view prefix) const;

  Reader::RemoteStats counters() const;  // requests (retries included), retries, body bytes
  const RemoteOptions& options() const { return options_; }

 private:
  struct Impl;
  // One download of `size` bytes into `file`, each chunk handed to `on_chunk` as it is written.
  Status DownloadOnce(std::string_view name, std::uint64_t size, const std::filesystem::path& file,
                      const std::function<void(std::span<const std::byte>)>& on_chunk) const;
  ObjectStore(std::string url, RemoteOptions options, std::unique_ptr<Impl> impl);
  Status UploadParts(std::string_view name, const std::string& upload_id,
                     const RandomAccessFile& input, std::uint64_t size) const;
  std::string url_;
  RemoteOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace packrec

#endif  // PACKREC_LIB_STORAGE_OBJECT_STORE_H_
