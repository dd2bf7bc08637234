#include "cli/npy.h"

#include "hybridgen/error.h"

namespace hg::cli {

NpyWriter::NpyWriter(const std::string& path, int64_t rows, int64_t cols)
    : path_(path), out_(path, std::ios::binary), rows_(rows), cols_(cols) {
  if (!out_) throw Error(path + ": cannot open for writing");
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                     std::to_string(cols) + "), }";
  // magic (6) + version (2) + header length (2) + dict + padding + '\n' is a multiple of 64
  const size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict.push_back('\n');
  const uint16_t len = static_cast<uint16_t>(dict.size());
  out_.write("\x93NUMPY\x01\x00", 8);
  const char len_bytes[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out_.write(len_bytes, 2);
  out_.write(dict.data(), static_cast<std::streamsize>(dict.size()));
}

void NpyWriter::write_rows(const float* data, int64_t n_rows) {
  out_.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(sizeof(float) * n_rows * cols_));
  written_ += n_rows;
  if (!out_) throw Error(path_ + ": write failed");
}

void NpyWriter::close() {
  out_.close();
  if (written_ != rows_)
    throw Error(path_ + ": wrote " + std::to_string(written_) + " rows, header says " + std::to_string(rows_));
}

}  // namespace hg::cli
