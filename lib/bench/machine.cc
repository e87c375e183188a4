// The machine a report was measured on, from /proc and /sys (Linux), so two JSON files from two
// machines can be told apart and compared.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "bench/bench_internal.h"
#include "packrec/reader.h"
#include "pipeline/cuda_runtime.h"

namespace packrec::bench {
namespace {

namespace fs = std::filesystem;

std::string FirstLineWith(const char* file, std::string_view prefix) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return "";
}

std::string AfterColon(const std::string& line) {
  const std::size_t colon = line.find(':');
  if (colon == std::string::npos) return "";
  std::size_t begin = line.find_first_not_of(" \t", colon + 1);
  return begin == std::string::npos ? "" : line.substr(begin);
}

// /sys/dev/block/MAJ:MIN, followed to the whole disk, says whether it spins.
std::string DeviceKind(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "unknown";
  const std::string dev =
      "/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
  std::error_code error;
  fs::path node = fs::canonical(dev, error);
  if (error) return "unknown";
  for (int up = 0; up < 2; ++up, node = node.parent_path()) {
    std::ifstream rotational(node / "queue" / "rotational");
    int value = -1;
    if (rotational >> value) return value == 1 ? "hdd" : "ssd";
  }
  return "unknown";
}

}  // namespace

std::string FilesystemType(const fs::path& path, std::string* device) {
  // The mount with the longest mount point that contains `path` (/proc/self/mounts).
  std::error_code error;
  const fs::path full = fs::weakly_canonical(fs::absolute(path, error), error);
  const std::string target = full.string();
  std::ifstream mounts("/proc/self/mounts");
  std::string best_point, best_type, best_source;
  for (std::string line; std::getline(mounts, line);) {
    std::istringstream fields(line);
    std::string source, point, type;
    if (!(fields >> source >> point >> type)) continue;
    const bool contains = target == point || point == "/" ||
                          (target.rfind(point, 0) == 0 && target.size() > point.size() &&
                           target[point.size()] == '/');
    if (contains && point.size() >= best_point.size()) {
      best_point = point;
      best_type = type;
      best_source = source;
    }
  }
  if (device != nullptr) *device = best_source;
  return best_type.empty() ? "unknown" : best_type;
}

double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double load = 0;
  return in >> load ? load : 0;
}

CpuTimes ReadCpuTimes() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  std::uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0,
                steal = 0;
  CpuTimes times;
  if (in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal &&
      cpu == "cpu") {
    times.busy = user + nice + system + irq + softirq;
    times.steal = steal;
    times.total = times.busy + idle + iowait + steal;
  }
  return times;
}

fs::path DefaultTempDir() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? fs::path(tmp) : fs::path("/tmp");
}

std::uint64_t MeminfoBytes(std::string_view key) {
  std::istringstream figure(AfterColon(FirstLineWith("/proc/meminfo", std::string(key) + ":")));
  std::uint64_t kib = 0;
  figure >> kib;
  return kib * 1024;
}

MachineInfo DescribeMachine(const fs::path& data_path, int cuda_device) {
  MachineInfo machine;
  machine.cpu_model = AfterColon(FirstLineWith("/proc/cpuinfo", "model name"));
  if (machine.cpu_model.empty()) machine.cpu_model = "unknown";
  machine.cores = std::max(1u, std::thread::hardware_concurrency());
  machine.memory_bytes = MeminfoBytes("MemTotal");
  utsname name{};
  if (::uname(&name) == 0) machine.kernel = std::string(name.sysname) + " " + name.release;
  machine.data_path = data_path.string();
  machine.gpu = cuda::DeviceCount() > cuda_device ? cuda::DeviceName(cuda_device)
                                                  : "none: " + cuda::Unavailable();
  if (IsDatasetUrl(machine.data_path)) {
    // No filesystem or device of this machine holds the data: the network does.
    const std::string scheme = machine.data_path.substr(0, machine.data_path.find(':'));
    machine.data_filesystem = scheme;
    machine.data_device = "network";
    machine.data_device_flag = "unknown";
    machine.data_device_kind = "network";
    machine.data_device_kind_from = "URL";
    return machine;
  }
  machine.data_filesystem = FilesystemType(data_path, &machine.data_device);
  // AnalyzeBench replaces the kind with the probe's measurement where it can.
  machine.data_device_flag = DeviceKind(data_path);
  machine.data_device_kind = machine.data_device_flag;
  machine.data_device_kind_from = "kernel flag";
  return machine;
}

}  // namespace packrec::bench
