// POSIX read-only mapping of a whole file: model weights are paged in on demand, never copied.
#include "native/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace lf {

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    close();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { close(); }

Status MappedFile::open(const std::string& path, MappedFile* out) {
  out->close();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status(Code::io_error, "cannot open '" + path + "': " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status(Code::io_error, "cannot stat '" + path + "': " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status(Code::io_error, "cannot map '" + path + "': not a regular file");
  }
  // mmap of length 0 fails; an empty file is a valid (if useless) mapping of nothing.
  if (st.st_size == 0) {
    ::close(fd);
    return Status();
  }
  void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (p == MAP_FAILED) return Status(Code::io_error, "cannot map '" + path + "': " + std::strerror(err));
  out->data_ = static_cast<uint8_t*>(p);
  out->size_ = static_cast<uint64_t>(st.st_size);
  return Status();
}

void MappedFile::close() {
  if (data_) ::munmap(data_, static_cast<size_t>(size_));
  data_ = nullptr;
  size_ = 0;
}

}  // namespace lf
