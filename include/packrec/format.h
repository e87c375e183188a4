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
};

// Every format CreateDatasetWriter takes, packrec's own (readable) first, in the registry's order.
const std::vector<FormatInfo>& ListFormats();

// The format called `name`; InvalidArgument naming the known ones when there is none.
Result<FormatInfo> FindFormat(std::string_view name);

// The names of the formats whose `FormatInfo::*flag` holds, as "a, b and c" (for messages).
std::string JoinFormatNames(bool FormatInfo::*flag);

}  // namespace packrec

#endif  // PACKREC_FORMAT_H_
