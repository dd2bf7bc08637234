// Writes a float32 NumPy .npy array row by row, so large logits dumps never sit in memory whole.
#pragma once
#include <cstdint>
#include <fstream>
#include <string>

namespace hg::cli {

class NpyWriter {
 public:
  // shape [rows, cols]; rows must be known up front (the header holds it).
  NpyWriter(const std::string& path, int64_t rows, int64_t cols);
  void write_rows(const float* data, int64_t n_rows);
  void close();  // checks that exactly `rows` rows were written

 private:
  std::string path_;
  std::ofstream out_;
  int64_t rows_, cols_, written_ = 0;
};

}  // namespace hg::cli
