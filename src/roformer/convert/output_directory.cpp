// Where a conversion writes (see output_directory.h).
#include "roformer/convert/output_directory.h"

#include <unistd.h>

#include <system_error>

#include "roformer/common/errors.h"
#include "roformer/common/files.h"

namespace roformer::convert {

void check_output_directory(const std::string& out_dir) {
  check_path_component(last_path_component(out_dir), "output directory");
  if (path_exists(out_dir) && (!is_directory(out_dir) || !std::filesystem::is_empty(out_dir)))
    throw UserError("output directory '" + out_dir + "' exists and is not an empty directory; choose a new one");
}

void write_directory(const std::string& out_dir, const std::function<void(const std::string& tmp)>& fill) {
  check_output_directory(out_dir);
  const std::filesystem::path out(out_dir);
  if (out.has_parent_path()) make_directories(out.parent_path().string());
  const std::string tmp = out_dir + ".tmp." + std::to_string(::getpid());
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
  make_directories(tmp);
  try {
    fill(tmp);
    if (path_exists(out_dir)) std::filesystem::remove(out_dir);  // the empty directory
    std::filesystem::rename(tmp, out_dir);
  } catch (...) {
    std::filesystem::remove_all(tmp, ec);
    throw;
  }
}

}  // namespace roformer::convert
