// File helpers (see files.h), on POSIX calls so the behaviour on errors is explicit.
#include "roformer/common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "roformer/common/errors.h"

namespace roformer {

std::string read_text_file(const std::string& path, size_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw UserError("cannot read '" + path + "': " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw UserError("'" + path + "' is a directory, not a file");
  if (!S_ISREG(st.st_mode))
    throw UserError("'" + path + "' is not a regular file (a device, FIFO or socket); point at a file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    throw UserError("'" + path + "' is " + std::to_string(st.st_size) + " bytes, more than the " +
                    std::to_string(max_bytes) + " this kind of file may have; is it the right file?");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot read '" + path + "': " + std::strerror(errno));
  std::string text(static_cast<size_t>(st.st_size), '\0');  // what stat saw, even if the file grows meanwhile
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

void check_path_component(const std::string& name, const std::string& what) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos)
    throw UserError(what + " '" + name +
                    "' cannot name a directory: it must be non-empty, without '/', and not '.' or '..'");
}

std::string last_path_component(const std::string& path) {
  std::string p = path;
  while (!p.empty() && p.back() == '/') p.pop_back();
  const size_t slash = p.find_last_of('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

void write_file_atomic(const std::string& path, const std::string& content) {
  write_file_atomic(path, [&](const PieceWriter& write) { write(content.data(), content.size()); });
}

void write_file_atomic(const std::string& path, const std::function<void(const PieceWriter&)>& produce) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    throw UserError("cannot write '" + tmp + "': " + std::strerror(errno) +
                    "; check the directory exists and is writable");
  const PieceWriter write = [&](const char* data, size_t size) {
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd, data + done, size - done);
      if (n < 0) throw UserError("writing '" + tmp + "' failed: " + std::strerror(errno) + " (disk full?)");
      done += static_cast<size_t>(n);
    }
  };
  try {
    produce(write);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw UserError("flushing '" + tmp + "' failed: " + std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw UserError("renaming '" + tmp + "' to '" + path + "' failed: " + std::strerror(err));
  }
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void make_directories(const std::string& path) {
  if (path.empty() || is_directory(path)) return;
  const auto slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) make_directories(path.substr(0, slash));
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
    throw UserError("cannot create directory '" + path + "': " + std::strerror(errno));
}

std::string sibling_executable(const std::string& name) {
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) throw std::runtime_error("cannot locate the running executable (/proc/self/exe)");
  self[n] = '\0';
  const std::string path(self);
  return path.substr(0, path.find_last_of('/')) + "/" + name;
}

uint32_t file_crc32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot read '" + path + "'");
  std::vector<char> buf(1 << 20);
  uLong crc = crc32(0L, Z_NULL, 0);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const std::streamsize n = in.gcount();
    if (n > 0) crc = crc32(crc, reinterpret_cast<const Bytef*>(buf.data()), static_cast<uInt>(n));
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace roformer
