#include "test_util.h"

#include <fcntl.h>
#include <png.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "core/random.h"
#include "decode/codecs.h"

extern char** environ;

namespace packrec::test {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "packrec-test-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

std::vector<std::byte> ReadBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::transform(chars.begin(), chars.end(), bytes.begin(),
                 [](char c) { return static_cast<std::byte>(c); });
  return bytes;
}

void WriteBytes(const fs::path& path, const std::vector<std::byte>& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

void WriteText(const fs::path& path, const std::string& text) {
  std::vector<std::byte> bytes(text.size());
  std::transform(text.begin(), text.end(), bytes.begin(),
                 [](char c) { return static_cast<std::byte>(c); });
  WriteBytes(path, bytes);
}

void FlipByte(const fs::path& path, std::uint64_t offset) {
  std::vector<std::byte> bytes = ReadBytes(path);
  if (offset >= bytes.size()) throw std::runtime_error("FlipByte past the end");
  bytes[offset] ^= std::byte{0x5a};
  WriteBytes(path, bytes);
}

void TruncateFile(const fs::path& path, std::uint64_t size) { fs::resize_file(path, size); }

std::vector<std::byte> MakeJpeg(std::uint32_t width, std::uint32_t height, std::uint64_t seed,
                                bool gray, bool progressive) {
  Pixels pixels;
  pixels.width = width;
  pixels.height = height;
  pixels.channels = gray ? 1 : 3;
  pixels.data.resize(static_cast<std::size_t>(width) * height * pixels.channels);
  SplitMix64 random(seed);
  const auto base = static_cast<unsigned>(random.Below(200));
  for (std::size_t i = 0; i < pixels.data.size(); ++i) {
    pixels.data[i] =
        static_cast<std::uint8_t>(base + (i / pixels.channels % width) / 8 + random.Below(16));
  }
  JpegEncodeOptions options;
  options.quality = 85;
  options.progressive = progressive;
  Result<std::vector<std::byte>> jpeg = EncodeJpeg(pixels, options);
  if (!jpeg.ok()) throw std::runtime_error(jpeg.status().ToString());
  return std::move(jpeg).value();
}

std::vector<std::byte> MakePng(std::uint32_t width, std::uint32_t height, std::uint64_t seed) {
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(width) * height * 3);
  SplitMix64 random(seed);
  // Smooth content, so zstd has something to gain only after PNG's own filter: like real data.
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    pixels[i] = static_cast<std::uint8_t>((i / 3 % width) + random.Below(2));
  }
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = width;
  image.height = height;
  image.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (png_image_write_to_memory(&image, nullptr, &size, 0, pixels.data(), 0, nullptr) == 0) {
    throw std::runtime_error(image.message);
  }
  std::vector<std::byte> bytes(size);
  if (png_image_write_to_memory(&image, bytes.data(), &size, 0, pixels.data(), 0, nullptr) == 0) {
    throw std::runtime_error(image.message);
  }
  bytes.resize(size);
  return bytes;
}

std::string Quote(const fs::path& path) {
  std::string quoted = "'";
  for (char c : path.string()) {
    if (c == '\'')
      quoted += "'\\''";
    else
      quoted += c;
  }
  return quoted + "'";
}

namespace {

CommandResult RunShell(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed");
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace

CommandResult RunCli(const std::string& args) {
  return RunShell(std::string(PACKREC_CLI_PATH) + " " + args + " 2>&1");
}

CommandResult RunCliStdout(const std::string& args) {
  return RunShell(std::string(PACKREC_CLI_PATH) + " " + args + " 2>/dev/null");
}

pid_t SpawnCli(const std::vector<std::string>& args, const fs::path& output) {
  std::vector<std::string> all = {PACKREC_CLI_PATH};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : all) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const std::string sink = output.empty() ? "/dev/null" : output.string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, sink.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) throw std::runtime_error("posix_spawn failed");
  return pid;
}

int WaitForCli(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) throw std::runtime_error("waitpid failed");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

ScopedTmpfs::ScopedTmpfs(const fs::path& path, const std::string& size) : path_(path) {
  fs::create_directories(path_);
  const std::string command =
      "mount -t tmpfs -o size=" + size + " tmpfs " + Quote(path_) + " 2>/dev/null";
  mounted_ = std::system(command.c_str()) == 0;
}

ScopedTmpfs::~ScopedTmpfs() {
  if (mounted_) (void)std::system(("umount " + Quote(path_) + " 2>/dev/null").c_str());
}

bool ScopedTmpfs::RemountReadOnly() const {
  return std::system(("mount -o remount,ro " + Quote(path_) + " 2>/dev/null").c_str()) == 0;
}

std::vector<std::pair<std::string, std::vector<std::byte>>> SnapshotTree(const fs::path& root) {
  std::vector<std::pair<std::string, std::vector<std::byte>>> files;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_regular_file()) {
      files.emplace_back(entry.path().lexically_relative(root).generic_string(),
                         ReadBytes(entry.path()));
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace packrec::test
