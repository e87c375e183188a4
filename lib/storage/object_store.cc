// HTTP(S) and S3 ranged reads through libcurl's multi interface. The HTTP client and the SigV4
// signing are libcurl's; what is written here is only which requests to send, how to read their
// answers and when to try again.
#include "storage/object_store.h"

#include "core/checksum.h"
#include "core/file_io.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <random>
#include <thread>

namespace packrec {
namespace {

using Clock = std::chrono::steady_clock;

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

std::string Trim(std::string_view text) {
  const auto begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  const auto end = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(begin, end - begin + 1));
}

// `key` of section `section` of an AWS INI file (~/.aws/credentials, ~/.aws/config); empty when
// absent. The config file names sections "profile NAME" except "default".
std::string IniValue(const std::string& file, const std::string& section, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    const std::string trimmed = Trim(line);
    if (trimmed.empty() || trimmed[0] == '#' || trimmed[0] == ';') continue;
    if (trimmed.front() == '[' && trimmed.back() == ']') {
      inside = Trim(std::string_view(trimmed).substr(1, trimmed.size() - 2)) == section;
      continue;
    }
    const auto equals = trimmed.find('=');
    if (inside && equals != std::string::npos && Trim(trimmed.substr(0, equals)) == key) {
      return Trim(std::string_view(trimmed).substr(equals + 1));
    }
  }
  return {};
}

struct AwsSettings {
  std::string region;
  std::string access_key;
  std::string secret_key;
  std::string session_token;
};

AwsSettings LoadAwsSettings() {
  const std::string home = Env("HOME");
  std::string credentials = Env("AWS_SHARED_CREDENTIALS_FILE");
  if (credentials.empty() && !home.empty()) credentials = home + "/.aws/credentials";
  std::string config = Env("AWS_CONFIG_FILE");
  if (config.empty() && !home.empty()) config = home + "/.aws/config";
  std::string profile = Env("AWS_PROFILE");
  if (profile.empty()) profile = "default";
  const std::string config_section = profile == "default" ? profile : "profile " + profile;

  AwsSettings aws;
  aws.region = Env("AWS_REGION");
  if (aws.region.empty()) aws.region = Env("AWS_DEFAULT_REGION");
  if (aws.region.empty()) aws.region = IniValue(config, config_section, "region");
  if (aws.region.empty()) aws.region = "us-east-1";
  aws.access_key = Env("AWS_ACCESS_KEY_ID");
  aws.secret_key = Env("AWS_SECRET_ACCESS_KEY");
  aws.session_token = Env("AWS_SESSION_TOKEN");
  if (aws.access_key.empty()) {
    aws.access_key = IniValue(credentials, profile, "aws_access_key_id");
    aws.secret_key = IniValue(credentials, profile, "aws_secret_access_key");
    aws.session_token = IniValue(credentials, profile, "aws_session_token");
  }
  return aws;
}

// Percent-encodes every byte but RFC 3986's unreserved characters (and '/' when `keep_slash`).
std::string PercentEncode(std::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) != 0 || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += c;
    } else {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    }
  }
  return out;
}

// Each '/'-separated segment of `path`, percent-encoded.
std::string EscapePath(std::string_view path) { return PercentEncode(path, true); }

void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct SlistFree {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

// One request's state while libcurl runs it.
struct Transfer {
  std::string url;
  std::string method = "GET";  // GET, HEAD, PUT, POST or DELETE
  std::uint64_t offset = 0;
  std::span<std::byte> out;                 // ranged: exactly these bytes are expected
  std::vector<std::byte>* whole = nullptr;  // whole object: appended here instead
  std::span<const std::byte> body;          // PUT, POST: what is sent
  std::size_t body_sent = 0;
  std::vector<std::string> request_headers;  // sent beside the store's own
  std::unique_ptr<curl_slist, SlistFree> header_list;
  std::size_t received = 0;
  bool overflow = false;
  long http_code = 0;
  std::string error_body;  // of a non-2xx answer, first bytes only (S3 puts its <Code> there)
  // From the answer's headers.
  std::string etag;
  std::string content_md5;   // base64, when the server sends one
  std::string stored_xxh64;  // x-amz-meta-packrec-xxh64
  std::optional<std::uint64_t> content_length;
  std::uint32_t tries = 0;
  Clock::time_point not_before{};
  std::array<char, CURL_ERROR_SIZE> curl_error{};

  bool Ranged() const { return method == "GET" && whole == nullptr; }
  std::string What() const {
    if (!Ranged()) return method + " " + url;
    return "GET " + url + " bytes " + std::to_string(offset) + "-" +
           std::to_string(offset + out.size() - 1);
  }
};

std::size_t OnBody(char* data, std::size_t size, std::size_t count, void* context) {
  auto* transfer = static_cast<Transfer*>(context);
  const std::size_t bytes = size * count;
  const auto* first = reinterpret_cast<const std::byte*>(data);
  if (transfer->http_code >= 300) {
    const std::size_t keep =
        std::min<std::size_t>(bytes, 512 - std::min<std::size_t>(512, transfer->error_body.size()));
    transfer->error_body.append(data, keep);
    return bytes;
  }
  if (transfer->whole != nullptr) {
    transfer->whole->insert(transfer->whole->end(), first, first + bytes);
  } else if (transfer->Ranged()) {
    if (bytes > transfer->out.size() - transfer->received) {
      transfer->overflow = true;
      return 0;  // aborts the transfer: the server sends more than the range asked for
    }
    std::copy(first, first + bytes, transfer->out.begin() + transfer->received);
  }
  transfer->received += bytes;
  return bytes;
}

std::string Lowercase(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

// Captures the HTTP status before the body, so OnBody knows where an error answer's body goes,
// and the few answer headers the writes need.
std::size_t OnHeader(char* data, std::size_t size, std::size_t count, void* context) {
  auto* transfer = static_cast<Transfer*>(context);
  const std::string_view line(data, size * count);
  if (line.starts_with("HTTP/")) {
    const auto space = line.find(' ');
    if (space != std::string_view::npos) {
      transfer->http_code =
          std::strtol(std::string(line.substr(space + 1, 3)).c_str(), nullptr, 10);
      transfer->error_body.clear();
      transfer->received = 0;
      if (transfer->whole != nullptr) transfer->whole->clear();
    }
    return size * count;
  }
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) return size * count;
  const std::string name = Lowercase(line.substr(0, colon));
  const std::string value = Trim(line.substr(colon + 1));
  if (name == "etag") {
    transfer->etag = value;
  } else if (name == "content-md5") {
    transfer->content_md5 = value;
  } else if (name == "x-amz-meta-packrec-xxh64") {
    transfer->stored_xxh64 = value;
  } else if (name == "content-length") {
    transfer->content_length = std::strtoull(value.c_str(), nullptr, 10);
  }
  return size * count;
}

// Feeds a PUT's body to libcurl.
std::size_t OnRead(char* buffer, std::size_t size, std::size_t count, void* context) {
  auto* transfer = static_cast<Transfer*>(context);
  const std::size_t n = std::min(size * count, transfer->body.size() - transfer->body_sent);
  std::memcpy(buffer, transfer->body.data() + transfer->body_sent, n);
  transfer->body_sent += n;
  return n;
}

// Rewinds a PUT's body (libcurl resends it after a redirect or an authentication round).
int OnSeek(void* context, curl_off_t offset, int origin) {
  auto* transfer = static_cast<Transfer*>(context);
  if (origin != SEEK_SET || offset < 0 ||
      static_cast<std::size_t>(offset) > transfer->body.size()) {
    return CURL_SEEKFUNC_CANTSEEK;
  }
  transfer->body_sent = static_cast<std::size_t>(offset);
  return CURL_SEEKFUNC_OK;
}

enum class Outcome { kDone, kRetry, kFail };

// The wait before try `tries` + 1: 50 ms doubled per try, at most 2 s, drawn from its upper half
// (jitter: clients that failed together do not come back together).
std::chrono::microseconds RetryDelay(std::uint32_t tries, std::mt19937& jitter) {
  const double capped = std::min(50.0 * std::pow(2.0, tries - 1), 2000.0);
  std::uniform_real_distribution<double> spread(capped / 2, capped);
  return std::chrono::microseconds(static_cast<long>(spread(jitter) * 1000));
}

// An easy handle for the next request: a used one, reset, or a new one (kept in `created`).
CURL* TakeHandle(std::vector<CURL*>& created, std::vector<CURL*>& idle) {
  if (idle.empty()) {
    CURL* handle = curl_easy_init();
    if (handle == nullptr) throw std::bad_alloc();
    return created.emplace_back(handle);
  }
  CURL* handle = idle.back();
  idle.pop_back();
  curl_easy_reset(handle);
  return handle;
}

bool TransientCurlError(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_WEIRD_SERVER_REPLY:  // a garbled answer on a kept-alive connection: ask again
      return true;
    default:
      return false;
  }
}

// The S3 error code in an XML error body ("<Code>NoSuchKey</Code>"), or the body's start.
std::string ErrorDetail(const std::string& body) {
  const auto begin = body.find("<Code>");
  const auto end = body.find("</Code>");
  if (begin != std::string::npos && end != std::string::npos && end > begin) {
    return ": " + body.substr(begin + 6, end - begin - 6);
  }
  return {};
}

// The text of the first <tag>...</tag> of an S3 XML answer (an UploadId). Hand-written rather
// than an XML library: the answers packrec reads are S3's fixed, flat documents, of which it needs
// one element; escaped characters do not occur in the values it reads (ids, ETags).
std::string XmlElement(std::string_view xml, std::string_view tag) {
  const std::string open = "<" + std::string(tag) + ">";
  const std::string close = "</" + std::string(tag) + ">";
  const auto begin = xml.find(open);
  if (begin == std::string_view::npos) return {};
  const auto end = xml.find(close, begin + open.size());
  if (end == std::string_view::npos) return {};
  return std::string(xml.substr(begin + open.size(), end - begin - open.size()));
}

std::string XmlEscape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string XmlUnescape(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '&') {
      out += text[i];
      continue;
    }
    static constexpr std::pair<std::string_view, char> kEntities[] = {
        {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    bool known = false;
    for (const auto& [entity, c] : kEntities) {
      if (text.substr(i, entity.size()) == entity) {
        out += c;
        i += entity.size() - 1;
        known = true;
        break;
      }
    }
    if (!known) out += '&';
  }
  return out;
}

// A query value as SigV4's canonical form spells it ('/' percent-encoded too), so that libcurl
// signs what S3 checks.
std::string EscapeQuery(std::string_view value) { return PercentEncode(value, false); }

std::span<const std::byte> AsByteSpan(std::string_view text) {
  return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

}  // namespace

bool IsDatasetUrl(std::string_view path) {
  return path.starts_with("http://") || path.starts_with("https://") || path.starts_with("s3://");
}

Result<ParsedUrl> ParseUrl(std::string_view url) {
  if (!IsDatasetUrl(url)) return Status::InvalidArgument(std::string(url) + " is not a URL");
  ParsedUrl parsed;
  parsed.text = std::string(url);
  const std::size_t after_scheme = parsed.text.find("://") + 3;
  while (parsed.text.size() > after_scheme && parsed.text.back() == '/') parsed.text.pop_back();
  if (!parsed.text.starts_with("s3://")) return parsed;
  parsed.s3 = true;
  const std::string rest = parsed.text.substr(5);
  const auto slash = rest.find('/');
  parsed.bucket = rest.substr(0, slash);
  if (slash != std::string::npos) parsed.key = rest.substr(slash + 1);
  while (parsed.key.starts_with("/")) parsed.key.erase(0, 1);
  if (parsed.bucket.empty()) return Status::InvalidArgument(std::string(url) + ": no bucket name");
  return parsed;
}

struct ObjectStore::Impl {
  std::string base;   // http(s) URL of the dataset "directory", no trailing '/'
  std::string shown;  // the URL as the user gave it (s3://...), which errors name instead of base
  bool s3 = false;    // an s3:// URL: writes are possible
  bool signed_s3 = false;
  std::string sigv4;  // "aws:amz:REGION:s3"
  std::string userpwd;
  curl_slist* headers = nullptr;

  // DNS and TLS sessions shared by every handle of this store. Recreated in a forked child.
  std::mutex share_mutex;
  CURLSH* share = nullptr;
  pid_t share_pid = 0;
  std::array<std::mutex, CURL_LOCK_DATA_LAST> locks;
  // Connections live in multi handles, which a fetch checks out of this pool and gives back:
  // a batch's requests reuse the connections an earlier fetch opened, and no connection is used
  // by two threads at once (libcurl does not support sharing connections across threads through
  // a share object). A child of fork() starts a pool of its own.
  std::mutex pool_mutex;
  std::vector<CURLM*> pool;
  pid_t pool_pid = 0;

  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::uint64_t> retries{0};
  std::atomic<std::uint64_t> bytes{0};

  ~Impl() {
    if (pool_pid == getpid()) {
      for (CURLM* multi : pool) curl_multi_cleanup(multi);
    }
    if (share != nullptr && share_pid == getpid()) curl_share_cleanup(share);
    curl_slist_free_all(headers);
  }

  CURLM* CheckOutMulti(const RemoteOptions& options) {
    {
      std::lock_guard lock(pool_mutex);
      if (pool_pid != getpid()) {
        pool = std::vector<CURLM*>();  // the parent's handles and connections: not ours
        pool_pid = getpid();
      }
      if (!pool.empty()) {
        CURLM* multi = pool.back();
        pool.pop_back();
        return multi;
      }
    }
    CURLM* multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS,
                      static_cast<long>(std::max<std::uint32_t>(1, options.max_in_flight)));
    return multi;
  }

  void GiveBack(CURLM* multi) {
    std::lock_guard lock(pool_mutex);
    if (pool_pid == getpid()) pool.push_back(multi);
  }

  static void Lock(CURL*, curl_lock_data data, curl_lock_access, void* self) {
    static_cast<Impl*>(self)->locks[static_cast<std::size_t>(data)].lock();
  }
  static void Unlock(CURL*, curl_lock_data data, void* self) {
    static_cast<Impl*>(self)->locks[static_cast<std::size_t>(data)].unlock();
  }

  CURLSH* Share() {
    std::lock_guard lock(share_mutex);
    if (share == nullptr || share_pid != getpid()) {
      // A parent's share is left alone in a child: its connections belong to the parent.
      share = curl_share_init();
      share_pid = getpid();
      curl_share_setopt(share, CURLSHOPT_LOCKFUNC, &Impl::Lock);
      curl_share_setopt(share, CURLSHOPT_UNLOCKFUNC, &Impl::Unlock);
      curl_share_setopt(share, CURLSHOPT_USERDATA, this);
      curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
      curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    }
    return share;
  }

  // The method, the body and the headers of a request other than a GET.
  void ConfigureMethod(CURL* handle, Transfer& transfer) {
    transfer.body_sent = 0;
    transfer.etag.clear();
    transfer.stored_xxh64.clear();
    transfer.content_length.reset();
    if (transfer.method == "HEAD") {
      curl_easy_setopt(handle, CURLOPT_NOBODY, 1L);
    } else if (transfer.method == "PUT") {
      curl_easy_setopt(handle, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(handle, CURLOPT_READFUNCTION, &OnRead);
      curl_easy_setopt(handle, CURLOPT_READDATA, &transfer);
      curl_easy_setopt(handle, CURLOPT_SEEKFUNCTION, &OnSeek);
      curl_easy_setopt(handle, CURLOPT_SEEKDATA, &transfer);
      curl_easy_setopt(handle, CURLOPT_INFILESIZE_LARGE,
                       static_cast<curl_off_t>(transfer.body.size()));
    } else if (transfer.method == "POST") {
      curl_easy_setopt(handle, CURLOPT_POST, 1L);
      curl_easy_setopt(handle, CURLOPT_POSTFIELDS, transfer.body.data());
      curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(transfer.body.size()));
    } else if (transfer.method == "DELETE") {
      curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    if (transfer.method == "GET" || transfer.method == "HEAD" || transfer.header_list) return;
    // Writes carry their own headers: the store's and the request's own (metadata, content
    // type). libcurl's "Expect: 100-continue" stays: an "Expect:" line that removes it would
    // still be listed among the signed headers by libcurl's SigV4, and S3 would refuse it.
    curl_slist* list = nullptr;
    for (const curl_slist* item = headers; item != nullptr; item = item->next) {
      list = curl_slist_append(list, item->data);
    }
    for (const std::string& header : transfer.request_headers) {
      list = curl_slist_append(list, header.c_str());
    }
    transfer.header_list.reset(list);
  }

  void Configure(CURL* handle, Transfer& transfer, const RemoteOptions& options) {
    curl_easy_setopt(handle, CURLOPT_URL, transfer.url.c_str());
    curl_easy_setopt(handle, CURLOPT_SHARE, Share());
    curl_easy_setopt(handle, CURLOPT_PRIVATE, &transfer);
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, &OnBody);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, &transfer);
    curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, &OnHeader);
    curl_easy_setopt(handle, CURLOPT_HEADERDATA, &transfer);
    curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, transfer.curl_error.data());
    curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(handle, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(handle, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(handle, CURLOPT_TCP_KEEPALIVE, 1L);
    const auto timeout_ms = static_cast<long>(options.timeout_seconds * 1000);
    curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS, std::max(1L, timeout_ms));
    // No byte for timeout_seconds fails the try (libcurl counts whole seconds here).
    curl_easy_setopt(handle, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(handle, CURLOPT_LOW_SPEED_TIME,
                     std::max(1L, static_cast<long>(std::ceil(options.timeout_seconds))));
    if (transfer.Ranged()) {
      const std::string range = std::to_string(transfer.offset) + "-" +
                                std::to_string(transfer.offset + transfer.out.size() - 1);
      curl_easy_setopt(handle, CURLOPT_RANGE, range.c_str());  // copied by libcurl
    }
    ConfigureMethod(handle, transfer);
    curl_easy_setopt(handle, CURLOPT_HTTPHEADER,
                     transfer.header_list ? transfer.header_list.get() : headers);
    if (signed_s3) {
      curl_easy_setopt(handle, CURLOPT_AWS_SIGV4, sigv4.c_str());
      curl_easy_setopt(handle, CURLOPT_USERPWD, userpwd.c_str());
    }
    transfer.received = 0;
    transfer.overflow = false;
    transfer.http_code = 0;
    transfer.error_body.clear();
    transfer.curl_error[0] = '\0';
    if (transfer.whole != nullptr) transfer.whole->clear();
  }

  // What to do with a finished try; `error` gets the reason when it is not kDone.
  static Outcome Judge(const Transfer& transfer, CURLcode code, const RemoteOptions& options,
                       Status& error) {
    const std::string what = transfer.What();
    if (code != CURLE_OK) {
      if (transfer.overflow) {
        error = Status::IOError(what + ": the server sent more bytes than the range asked for " +
                                "(it does not honour Range requests)");
        return Outcome::kFail;
      }
      const std::string detail = transfer.curl_error[0] != '\0'
                                     ? std::string(transfer.curl_error.data())
                                     : std::string(curl_easy_strerror(code));
      if (code == CURLE_OPERATION_TIMEDOUT) {
        error =
            Status::IOError(what + ": no answer within " +
                            std::to_string(static_cast<int>(std::ceil(options.timeout_seconds))) +
                            " s (" + detail + ")");
      } else {
        error = Status::IOError(what + ": " + detail);
      }
      return TransientCurlError(code) ? Outcome::kRetry : Outcome::kFail;
    }
    const long status = transfer.http_code;
    if (transfer.method != "GET" && status >= 200 && status < 300) return Outcome::kDone;
    if (transfer.method == "GET" &&
        (status == 206 || (status == 200 && (transfer.whole != nullptr || transfer.offset == 0)))) {
      if (transfer.whole == nullptr && transfer.received != transfer.out.size()) {
        error =
            Status::IOError(what + ": the answer ended after " + std::to_string(transfer.received) +
                            " of " + std::to_string(transfer.out.size()) + " bytes");
        return Outcome::kRetry;
      }
      return Outcome::kDone;
    }
    const std::string http =
        " (HTTP " + std::to_string(status) + ErrorDetail(transfer.error_body) + ")";
    if (status == 404) {
      error = Status::NotFound(what + ": no such object" + http);
      return Outcome::kFail;
    }
    if (status == 401 || status == 403) {
      error = Status::IOError(what + ": access denied" + http);
      return Outcome::kFail;
    }
    if (status == 416) {
      error = Status::Truncated(what + ": the range lies past the end of the object" + http);
      return Outcome::kFail;
    }
    if (status == 200 && transfer.method == "GET") {
      error =
          Status::IOError(what + ": the server answered the whole object instead of the range " +
                          "(it does not honour Range requests)");
      return Outcome::kFail;
    }
    error = Status::IOError(what + ": the server answered" + http);
    return status >= 500 || status == 429 || status == 408 ? Outcome::kRetry : Outcome::kFail;
  }

  // Runs every transfer to completion; the first transfer (in order) that fails for good gives
  // the error. Transfers after a failure are abandoned.
  Status Run(std::vector<Transfer>& transfers, const RemoteOptions& options,
             const std::atomic<bool>* cancel = nullptr) {
    GlobalInitOnce();
    CURLM* multi = CheckOutMulti(options);
    std::vector<CURL*> created;  // every handle, cleaned up at the end
    std::vector<CURL*> idle;
    std::deque<std::size_t> waiting;
    for (std::size_t i = 0; i < transfers.size(); ++i) waiting.push_back(i);
    std::size_t active = 0;
    Status failure;
    std::mt19937 jitter(static_cast<unsigned>(Clock::now().time_since_epoch().count()));
    const std::size_t limit = std::max<std::uint32_t>(1, options.max_in_flight);
    while (failure.ok() && (!waiting.empty() || active > 0)) {
      if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
        failure = Status::IOError("fetch from " + transfers.front().url + " cancelled");
        break;
      }
      const Clock::time_point now = Clock::now();
      for (std::size_t pass = waiting.size(); pass > 0 && active < limit; --pass) {
        const std::size_t next = waiting.front();
        waiting.pop_front();
        if (transfers[next].not_before > now) {
          waiting.push_back(next);
          continue;
        }
        CURL* handle = TakeHandle(created, idle);
        Configure(handle, transfers[next], options);
        ++transfers[next].tries;
        requests.fetch_add(1, std::memory_order_relaxed);
        curl_multi_add_handle(multi, handle);
        ++active;
      }
      int running = 0;
      curl_multi_perform(multi, &running);
      int queued = 0;
      while (CURLMsg* message = curl_multi_info_read(multi, &queued)) {
        if (message->msg != CURLMSG_DONE) continue;
        CURL* handle = message->easy_handle;
        const CURLcode code = message->data.result;
        Transfer* transfer = nullptr;
        curl_easy_getinfo(handle, CURLINFO_PRIVATE, &transfer);
        curl_multi_remove_handle(multi, handle);
        idle.push_back(handle);
        --active;
        bytes.fetch_add(transfer->received, std::memory_order_relaxed);
        Status error;
        const Outcome outcome = Judge(*transfer, code, options, error);
        if (outcome == Outcome::kDone) continue;
        if (outcome == Outcome::kRetry && transfer->tries < options.max_tries) {
          retries.fetch_add(1, std::memory_order_relaxed);
          transfer->not_before = Clock::now() + RetryDelay(transfer->tries, jitter);
          waiting.push_back(static_cast<std::size_t>(transfer - transfers.data()));
          continue;
        }
        failure = outcome == Outcome::kRetry
                      ? Status(error.code(), error.message() + " (tried " +
                                                 std::to_string(transfer->tries) + " times)")
                      : error;
      }
      if (failure.ok() && (active > 0 || !waiting.empty())) {
        curl_multi_poll(multi, nullptr, 0, active > 0 ? 100 : 10, nullptr);
      }
    }
    // Transfers still running after a failure are abandoned: out of the multi before cleanup.
    for (CURL* handle : created) {
      curl_multi_remove_handle(multi, handle);
      curl_easy_cleanup(handle);
    }
    GiveBack(multi);
    return Shown(std::move(failure));
  }

  // An error names the object by the user's URL (s3://bucket/key/name), not the endpoint's.
  Status Shown(Status status) const {
    if (status.ok() || shown.empty() || shown == base) return status;
    std::string message = status.message();
    for (auto at = message.find(base); at != std::string::npos;
         at = message.find(base, at + shown.size())) {
      message.replace(at, base.size(), shown);
    }
    return Status(status.code(), std::move(message));
  }
};

ObjectStore::ObjectStore(std::string url, RemoteOptions options, std::unique_ptr<Impl> impl)
    : url_(std::move(url)), options_(options), impl_(std::move(impl)) {}

ObjectStore::~ObjectStore() = default;

namespace {

// "50GiB", "512MiB", "1048576": bytes with an optional binary suffix.
std::optional<std::uint64_t> ParseByteCount(const std::string& text) {
  char* end = nullptr;
  const unsigned long long number = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str()) return std::nullopt;
  const std::string suffix = end;
  const std::map<std::string, unsigned> shifts{{"", 0},     {"B", 0},    {"KiB", 10},
                                               {"MiB", 20}, {"GiB", 30}, {"TiB", 40}};
  const auto shift = shifts.find(suffix);
  if (shift == shifts.end() || number > (UINT64_MAX >> shift->second)) return std::nullopt;
  return static_cast<std::uint64_t>(number) << shift->second;
}

// `value` from variable `name` when it is set: a count from 1 to `maximum`.
Status CountFromEnv(const char* name, unsigned long maximum, std::uint32_t& value) {
  const std::string text = Env(name);
  if (text.empty()) return Status::OK();
  char* end = nullptr;
  const unsigned long parsed = std::strtoul(text.c_str(), &end, 10);
  if (*end != '\0' || parsed == 0 || parsed > maximum) {
    return Status::InvalidArgument(std::string(name) + " must be a count from 1 to " +
                                   std::to_string(maximum) + ", got '" + text + "'");
  }
  value = static_cast<std::uint32_t>(parsed);
  return Status::OK();
}

// The PACKREC_REMOTE_* and PACKREC_CACHE_* variables override `options`: one setting for the
// CLI, Python and the worker processes a DataLoader starts.
Result<RemoteOptions> WithEnvironment(RemoteOptions options) {
  const std::string timeout = Env("PACKREC_REMOTE_TIMEOUT");
  if (!timeout.empty()) {
    char* end = nullptr;
    options.timeout_seconds = std::strtod(timeout.c_str(), &end);
    if (*end != '\0' || !(options.timeout_seconds > 0) || options.timeout_seconds > 86400) {
      return Status::InvalidArgument(
          "PACKREC_REMOTE_TIMEOUT must be seconds from 0 to 86400, got '" + timeout + "'");
    }
  }
  PACKREC_RETURN_IF_ERROR(CountFromEnv("PACKREC_REMOTE_TRIES", 100, options.max_tries));
  PACKREC_RETURN_IF_ERROR(CountFromEnv("PACKREC_REMOTE_IN_FLIGHT", 1024, options.max_in_flight));
  const std::string block = Env("PACKREC_CACHE_BLOCK");
  if (!block.empty()) {
    const std::optional<std::uint64_t> bytes = ParseByteCount(block);
    if (!bytes || *bytes < 4096) {
      return Status::InvalidArgument(
          "PACKREC_CACHE_BLOCK must be a size of at least 4096 bytes, got '" + block + "'");
    }
    options.cache_block_bytes = *bytes;
  }
  const std::string cache = Env("PACKREC_CACHE_DIR");
  if (!cache.empty()) options.cache_dir = cache;
  const std::string cache_size = Env("PACKREC_CACHE_SIZE");
  if (!cache_size.empty()) {
    const std::optional<std::uint64_t> bytes = ParseByteCount(cache_size);
    if (!bytes || *bytes == 0) {
      return Status::InvalidArgument(
          "PACKREC_CACHE_SIZE must be a size in bytes (a suffix KiB, MiB, GiB or TiB allowed), "
          "got '" +
          cache_size + "'");
    }
    options.cache_size_bytes = *bytes;
  }
  return options;
}

}  // namespace

Result<std::shared_ptr<ObjectStore>> ObjectStore::ForUrl(std::string_view url,
                                                         const RemoteOptions& given) {
  if (!IsRemoteUrl(url)) return Status::InvalidArgument(std::string(url) + " is not a URL");
  PACKREC_ASSIGN_OR_RETURN(const RemoteOptions options, WithEnvironment(given));
  if (options.max_tries == 0) return Status::InvalidArgument("max_tries must be at least 1");
  if (!(options.timeout_seconds > 0)) {
    return Status::InvalidArgument("the remote timeout must be positive");
  }
  auto impl = std::make_unique<Impl>();
  PACKREC_ASSIGN_OR_RETURN(const ParsedUrl parsed, ParseUrl(url));
  const std::string& trimmed = parsed.text;
  if (parsed.s3) {
    impl->s3 = true;
    const std::string& bucket = parsed.bucket;
    const std::string& key = parsed.key;
    const AwsSettings aws = LoadAwsSettings();
    std::string endpoint = Env("AWS_ENDPOINT_URL_S3");
    if (endpoint.empty()) endpoint = Env("AWS_ENDPOINT_URL");
    if (endpoint.empty()) endpoint = "https://s3." + aws.region + ".amazonaws.com";
    while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
    // Path-style addressing: works with every S3-compatible server and with AWS.
    impl->base = endpoint + "/" + EscapePath(bucket) + (key.empty() ? "" : "/" + EscapePath(key));
    if (!aws.access_key.empty()) {
      impl->signed_s3 = true;
      impl->sigv4 = "aws:amz:" + aws.region + ":s3";
      impl->userpwd = aws.access_key + ":" + aws.secret_key;
      // S3 wants the payload's hash in a header; GETs carry none.
      impl->headers = curl_slist_append(impl->headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
      if (!aws.session_token.empty()) {
        impl->headers = curl_slist_append(impl->headers,
                                          ("x-amz-security-token: " + aws.session_token).c_str());
      }
    }
  } else {
    impl->base = trimmed;
  }
  impl->shown = trimmed;
  return std::shared_ptr<ObjectStore>(new ObjectStore(trimmed, options, std::move(impl)));
}

std::string ObjectStore::NameUrl(std::string_view name) const {
  return impl_->base + "/" + EscapePath(name);
}

Result<std::vector<std::byte>> ObjectStore::Get(std::string_view name) const {
  std::vector<std::byte> body;
  std::vector<Transfer> transfers(1);
  transfers[0].url = NameUrl(name);
  transfers[0].whole = &body;
  PACKREC_RETURN_IF_ERROR(impl_->Run(transfers, options_));
  return body;
}

Status ObjectStore::Fetch(std::span<const Range> ranges, const std::atomic<bool>* cancel) const {
  std::vector<Transfer> transfers;
  transfers.reserve(ranges.size());
  for (const Range& range : ranges) {
    if (range.out.empty()) continue;
    Transfer& transfer = transfers.emplace_back();
    transfer.url = NameUrl(range.name);
    transfer.offset = range.offset;
    transfer.out = range.out;
  }
  return impl_->Run(transfers, options_, cancel);
}

Status ObjectStore::CheckWritable() const {
  if (impl_->s3) return Status::OK();
  return Status::NotSupported("cannot write to " + url_ +
                              ": packrec writes datasets to s3:// URLs only (plain HTTP has no " +
                              "standard upload)");
}

Result<std::optional<ObjectStore::ObjectHead>> ObjectStore::Head(std::string_view name) const {
  std::vector<Transfer> transfers(1);
  transfers[0].url = NameUrl(name);
  transfers[0].method = "HEAD";
  const Status status = impl_->Run(transfers, options_);
  if (status.code() == StatusCode::kNotFound) return std::optional<ObjectHead>();
  PACKREC_RETURN_IF_ERROR(status);
  return std::optional<ObjectHead>(ObjectHead{transfers[0].content_length.value_or(0),
                                              transfers[0].stored_xxh64, transfers[0].etag,
                                              transfers[0].content_md5});
}

Status ObjectStore::Put(std::string_view name, std::span<const std::byte> bytes,
                        std::string_view xxh64) const {
  PACKREC_RETURN_IF_ERROR(CheckWritable());
  std::vector<Transfer> transfers(1);
  transfers[0].url = NameUrl(name);
  transfers[0].method = "PUT";
  transfers[0].body = bytes;
  if (!xxh64.empty()) {
    transfers[0].request_headers.push_back("x-amz-meta-packrec-xxh64: " + std::string(xxh64));
  }
  return impl_->Run(transfers, options_);
}

Status ObjectStore::Delete(std::string_view name) const {
  PACKREC_RETURN_IF_ERROR(CheckWritable());
  std::vector<Transfer> transfers(1);
  transfers[0].url = NameUrl(name);
  transfers[0].method = "DELETE";
  const Status status = impl_->Run(transfers, options_);
  return status.code() == StatusCode::kNotFound ? Status::OK() : status;
}

Status ObjectStore::PutFile(std::string_view name, const std::filesystem::path& file,
                            std::string_view xxh64) const {
  PACKREC_RETURN_IF_ERROR(CheckWritable());
  PACKREC_ASSIGN_OR_RETURN(const std::unique_ptr<RandomAccessFile> input,
                           RandomAccessFile::Open(file));
  PACKREC_ASSIGN_OR_RETURN(const std::uint64_t size, input->RegularFileSize());
  if (size <= kMultipartPartBytes) {
    std::vector<std::byte> bytes(size);
    PACKREC_RETURN_IF_ERROR(input->ReadExact(0, bytes));
    return Put(name, bytes, xxh64);
  }
  // Create, parts, complete: S3 shows the object only once the upload is completed.
  std::vector<std::byte> answer;
  std::vector<Transfer> create(1);
  // "uploads=", not "uploads": libcurl 7.88's SigV4 signs a bare query key without the '=' that
  // AWS's canonical form gives it, and S3 would refuse the signature.
  create[0].url = NameUrl(name) + "?uploads=";
  create[0].method = "POST";
  create[0].whole = &answer;
  if (!xxh64.empty()) {
    create[0].request_headers.push_back("x-amz-meta-packrec-xxh64: " + std::string(xxh64));
  }
  PACKREC_RETURN_IF_ERROR(impl_->Run(create, options_));
  const std::string upload_id = XmlElement(
      std::string_view(reinterpret_cast<const char*>(answer.data()), answer.size()), "UploadId");
  if (upload_id.empty()) {
    return Status::IOError("POST " + create[0].url + ": the answer names no UploadId");
  }
  const Status uploaded = UploadParts(name, upload_id, *input, size);
  if (!uploaded.ok()) {
    std::vector<Transfer> abort(1);
    abort[0].url = NameUrl(name) + "?uploadId=" + upload_id;
    abort[0].method = "DELETE";
    impl_->Run(abort, options_).ok();  // best effort: the upload's error is the one to report
  }
  return uploaded;
}

Status ObjectStore::UploadParts(std::string_view name, const std::string& upload_id,
                                const RandomAccessFile& input, std::uint64_t size) const {
  constexpr std::size_t kPartsInFlight = 4;
  const std::uint64_t part_count = (size + kMultipartPartBytes - 1) / kMultipartPartBytes;
  std::vector<std::string> etags(part_count);
  std::vector<std::vector<std::byte>> buffers(kPartsInFlight);
  for (std::uint64_t first = 0; first < part_count; first += kPartsInFlight) {
    std::vector<Transfer> parts;
    for (std::uint64_t part = first; part < std::min(part_count, first + kPartsInFlight); ++part) {
      const std::uint64_t offset = part * kMultipartPartBytes;
      std::vector<std::byte>& buffer = buffers[part - first];
      buffer.resize(std::min(kMultipartPartBytes, size - offset));
      PACKREC_RETURN_IF_ERROR(input.ReadExact(offset, buffer));
      Transfer& transfer = parts.emplace_back();
      transfer.url =
          NameUrl(name) + "?partNumber=" + std::to_string(part + 1) + "&uploadId=" + upload_id;
      transfer.method = "PUT";
      transfer.body = buffer;
    }
    PACKREC_RETURN_IF_ERROR(impl_->Run(parts, options_));
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].etag.empty()) {
        return Status::IOError("PUT " + parts[i].url + ": the answer carries no ETag");
      }
      etags[first + i] = parts[i].etag;
    }
  }
  std::string xml = "<CompleteMultipartUpload>";
  for (std::size_t i = 0; i < etags.size(); ++i) {
    xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" +
           XmlEscape(etags[i]) + "</ETag></Part>";
  }
  xml += "</CompleteMultipartUpload>";
  std::vector<std::byte> answer;
  std::vector<Transfer> complete(1);
  complete[0].url = NameUrl(name) + "?uploadId=" + upload_id;
  complete[0].method = "POST";
  complete[0].body = AsByteSpan(xml);
  complete[0].whole = &answer;
  complete[0].request_headers.push_back("Content-Type: application/xml");
  PACKREC_RETURN_IF_ERROR(impl_->Run(complete, options_));
  // S3 may answer 200 and still fail the completion, with an <Error> document as the body.
  const std::string_view text(reinterpret_cast<const char*>(answer.data()), answer.size());
  if (text.find("<Error>") != std::string_view::npos) {
    return Status::IOError("POST " + complete[0].url + ": the upload was not completed" +
                           ErrorDetail(std::string(text.substr(0, 512))));
  }
  return Status::OK();
}

namespace {

// Lowercase hex of `bytes` (an MD5).
std::string HexBytes(const unsigned char* bytes, std::size_t size) {
  std::string hex;
  for (std::size_t i = 0; i < size; ++i) hex += Hex64(bytes[i]).substr(14);
  return hex;
}

// What the server says the object's bytes hash to: packrec's own xxh64 (its uploads carry it),
// else S3's ETag of a single-part upload (the MD5 of the bytes, 32 hex digits in quotes), else
// Content-MD5 (base64); kind kNone when it says nothing a download can be checked against
// (nginx's ETag is its file's time and size).
struct ExpectedDigest {
  enum class Kind { kNone, kXxh64, kMd5 } kind = Kind::kNone;
  std::string source;  // where it came from, as messages name it
  std::string hex;     // lowercase
};

ExpectedDigest ExpectedDigestOf(const ObjectStore::ObjectHead& head) {
  using Kind = ExpectedDigest::Kind;
  if (head.xxh64.size() == 16) return {Kind::kXxh64, "xxh64", Lowercase(head.xxh64)};
  std::string etag = head.etag;
  if (etag.starts_with("W/")) etag.clear();  // a weak ETag says nothing of the bytes
  if (etag.size() == 34 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, 32);
  }
  if (etag.size() == 32 &&
      std::all_of(etag.begin(), etag.end(), [](unsigned char c) { return std::isxdigit(c); })) {
    return {Kind::kMd5, "ETag (MD5)", Lowercase(etag)};
  }
  if (head.content_md5.size() == 24) {
    std::array<unsigned char, 18> raw{};
    const int length = EVP_DecodeBlock(
        raw.data(), reinterpret_cast<const unsigned char*>(head.content_md5.data()), 24);
    if (length == 18) {  // 16 bytes and the 2 the padding decodes to
      return {Kind::kMd5, "Content-MD5", HexBytes(raw.data(), 16)};
    }
  }
  return {};
}

// The digest of `kind` of a download, computed as its chunks are written; nothing is hashed for
// kNone (most plain HTTP servers), so an unchecked import costs no hashing.
class DownloadDigest {
 public:
  explicit DownloadDigest(ExpectedDigest::Kind kind) : kind_(kind) {
    if (kind_ == ExpectedDigest::Kind::kMd5) {
      md5_ = EVP_MD_CTX_new();
      EVP_DigestInit_ex(md5_, EVP_md5(), nullptr);
    }
  }
  ~DownloadDigest() { EVP_MD_CTX_free(md5_); }  // null-safe
  DownloadDigest(const DownloadDigest&) = delete;
  DownloadDigest& operator=(const DownloadDigest&) = delete;
  void Update(std::span<const std::byte> bytes) {
    if (kind_ == ExpectedDigest::Kind::kMd5) EVP_DigestUpdate(md5_, bytes.data(), bytes.size());
    if (kind_ == ExpectedDigest::Kind::kXxh64) xxh64_.Update(bytes);
  }
  // Lowercase hex, as ExpectedDigest holds it.
  std::string Hex() {
    if (kind_ == ExpectedDigest::Kind::kXxh64) return Hex64(xxh64_.Digest());
    std::array<unsigned char, EVP_MAX_MD_SIZE> md5{};
    unsigned int size = 0;
    EVP_DigestFinal_ex(md5_, md5.data(), &size);
    return HexBytes(md5.data(), size);
  }

 private:
  ExpectedDigest::Kind kind_;
  EVP_MD_CTX* md5_ = nullptr;
  Xxh64Stream xxh64_;
};

}  // namespace

// Plain HTTP moves bytes without a checksum, and a tar has none of its own: where the server says
// what the object hashes to, the download is checked against it, and fetched again (three tries
// in all) when a byte was damaged on the way.
Status ObjectStore::Download(std::string_view name, const std::filesystem::path& file) const {
  PACKREC_ASSIGN_OR_RETURN(const std::optional<ObjectHead> head, Head(name));
  if (!head) return Status::NotFound(NameUrl(name) + ": no such object");
  const ExpectedDigest expected = ExpectedDigestOf(*head);
  Status checked;
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (attempt > 0) {
      std::error_code ignored;
      std::filesystem::remove(file, ignored);  // the damaged copy, made by this call
    }
    DownloadDigest digest(expected.kind);
    PACKREC_RETURN_IF_ERROR(
        DownloadOnce(name, head->size, file, [&digest](auto bytes) { digest.Update(bytes); }));
    if (expected.kind == ExpectedDigest::Kind::kNone) return Status::OK();
    const std::string got = digest.Hex();
    if (got == expected.hex) return Status::OK();
    checked = Status::Corruption(NameUrl(name) + ": the downloaded bytes hash to " + got +
                                 ", the server's " + expected.source + " says " + expected.hex +
                                 " (damaged on the way, three times)")
                  .WithPath(NameUrl(name));
  }
  return checked;
}

Status ObjectStore::DownloadOnce(
    std::string_view name, std::uint64_t size, const std::filesystem::path& file,
    const std::function<void(std::span<const std::byte>)>& on_chunk) const {
  constexpr std::uint64_t kChunkBytes = 8 << 20;
  constexpr std::size_t kChunksInFlight = 8;
  PACKREC_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> out, WritableFile::Create(file));
  std::vector<std::vector<std::byte>> buffers(kChunksInFlight);
  for (std::uint64_t offset = 0; offset < size;) {
    std::vector<Range> ranges;
    for (std::size_t i = 0; i < kChunksInFlight && offset < size; ++i) {
      buffers[i].resize(std::min(kChunkBytes, size - offset));
      ranges.push_back({std::string(name), offset, buffers[i]});
      offset += buffers[i].size();
    }
    PACKREC_RETURN_IF_ERROR(Fetch(ranges));
    for (const Range& range : ranges) {
      on_chunk(range.out);
      PACKREC_RETURN_IF_ERROR(out->Append(range.out));
    }
  }
  return out->Close();
}

Status ObjectStore::DeletePrefix(std::string_view prefix) const {
  if (prefix.empty()) {
    return Status::InvalidArgument("refusing to delete every object of " + url_ +
                                   " (an empty prefix)");
  }
  PACKREC_ASSIGN_OR_RETURN(const std::vector<std::string> keys, ListKeys(prefix));
  for (const std::string& key : keys) PACKREC_RETURN_IF_ERROR(Delete(key));
  return Status::OK();
}

Result<std::vector<std::string>> ObjectStore::ListKeys(std::string_view prefix) const {
  if (!impl_->s3) {
    return Status::NotSupported("cannot list " + url_ + ": a pattern over a URL needs s3:// " +
                                "(plain HTTP has no listing); name the files, or use braces");
  }
  std::vector<std::string> keys;
  std::string token;
  do {
    std::string query = "?list-type=2&prefix=" + EscapeQuery(prefix);
    if (!token.empty())
      query = "?continuation-token=" + EscapeQuery(token) + "&list-type=2" +
              "&prefix=" + EscapeQuery(prefix);
    std::vector<std::byte> answer;
    std::vector<Transfer> list(1);
    list[0].url = impl_->base + query;
    list[0].whole = &answer;
    PACKREC_RETURN_IF_ERROR(impl_->Run(list, options_));
    const std::string_view xml(reinterpret_cast<const char*>(answer.data()), answer.size());
    for (auto at = xml.find("<Contents>"); at != std::string_view::npos;
         at = xml.find("<Contents>", at + 1)) {
      keys.push_back(XmlUnescape(XmlElement(xml.substr(at), "Key")));
    }
    token = XmlElement(xml, "IsTruncated") == "true" ? XmlElement(xml, "NextContinuationToken")
                                                     : std::string();
  } while (!token.empty());
  return keys;
}

Reader::RemoteStats ObjectStore::counters() const {
  return {impl_->requests.load(), impl_->retries.load(), impl_->bytes.load()};
}

}  // namespace packrec
