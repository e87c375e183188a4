// The storage formats packrec writes, as each format describes itself (formats/*/, listed by the
// registry): what the CLI offers as --format, what Python accepts as format=, what a --part
// output is named, and where a dataset keeps its rejects. Nothing above the formats compares a
// format's name; it asks here.
//
// Threading: the list is built once and never changes; any thread may call these at any time.
#ifndef PACKREC_FORMAT_H_
#define PACKREC_FORMAT_H_

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "packrec/status.h"

namespace packrec {

struct FormatInfo {
  std::string name;     // what WriterOptions::format, --format and DatasetInfo::format say
  std::string summary;  // one line, for help texts
  // File name endings that say this format (".pkr"); the first one names --part outputs.
  std::vector<std::string> suffixes;
  bool readable = false;       // packrec opens it as a dataset (OpenDataset); else an export only
  bool single_file = false;    // the dataset is one file (HDF5), not a directory
  bool resumable = false;      // an interrupted conversion to it continues (ConvertOptions::resume)
  bool stores_fields = false;  // it keeps record fields (WriterOptions::fields); others refuse them
  // An export's: the endings of the files its output directory holds (".tar"). An output named
  // like one of them is refused unless this format is asked for (ChooseOutputFormat).
  std::vector<std::string> file_suffixes = {};
};

// Every format CreateDatasetWriter takes, packrec's own (readable) first, in the registry's order.
const std::vector<FormatInfo>& ListFormats();

// The format called `name`; InvalidArgument naming the known ones when there is none.
Result<FormatInfo> FindFormat(std::string_view name);

// The format to write `output` in. `requested` is the one asked for (WriterOptions::format,
// --format, format=); empty: the one whose suffix `output`'s name ends with (.pkr shard, .lmdb
// lmdb, .h5 or .hdf5 hdf5; any case), else the registry's first (shard). InvalidArgument when
// the name ends with the suffix of another format than the one asked for (`data.h5` as lmdb), or
// like one file of an export (`out.tar`, `train.tfrecord`) when that export is not the one asked
// for: an export writes a directory of such files, and anything else under such a name misleads
// every tool that opens it.
Result<std::string> ChooseOutputFormat(const std::filesystem::path& output,
                                       std::string_view requested);

// The names of the formats whose `FormatInfo::*flag` holds, as "a, b and c" (for messages).
std::string JoinFormatNames(bool FormatInfo::*flag);

}  // namespace packrec

#endif  // PACKREC_FORMAT_H_
