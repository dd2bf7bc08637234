// The CPU device's packed decode copies are shared by the devices of a process (eval's policies
// each own an engine over one model): two devices uploading one matrix hold one packed copy and
// compute the same product as the mapped weights' GEMV; the copy goes when the last device that
// holds it goes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "device/device.h"
#include "hybridgen/model.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_packed.h"

namespace hg::test {
namespace {

// A Q4_0 matrix [rows][cols] (blocks of 32: an f16 scale and 16 bytes of nibbles).
std::vector<uint8_t> random_q4_0(int64_t rows, int64_t cols, std::mt19937& rng) {
  std::vector<uint8_t> w(static_cast<size_t>(rows * cols / 32 * 18));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.01f, 0.1f);
  for (size_t b = 0; b < w.size(); b += 18) {
    const uint16_t d = cpu::fp32_to_f16(scale(rng));
    w[b] = static_cast<uint8_t>(d & 0xff);
    w[b + 1] = static_cast<uint8_t>(d >> 8);
    for (int i = 2; i < 18; ++i) w[b + static_cast<size_t>(i)] = static_cast<uint8_t>(byte(rng));
  }
  return w;
}

TensorView view(const std::vector<uint8_t>& w, int64_t rows, int64_t cols) {
  TensorView t;
  t.name = "w";
  t.dtype = DType::Q4_0;
  t.shape = {rows, cols};
  t.data = w.data();
  t.nbytes = w.size();
  return t;
}

TEST(CpuDevice, DevicesShareThePackedCopyOfAMatrix) {
  if (!cpu::packing_pays(DType::Q4_0)) GTEST_SKIP() << "no packed GEMV on this CPU";
  const int64_t rows = 96, cols = 256;
  std::mt19937 rng(5);
  const auto a = random_q4_0(rows, cols, rng), b = random_q4_0(rows, cols, rng);
  std::vector<float> x(static_cast<size_t>(cols));
  for (auto& v : x) v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
  // the product of the dequantized rows, and a bound of the GEMV's error: it rounds x to int8 per
  // block of 32 (|x| <= 1: an error of at most 1/127 each), so |y - want| <= Σ|w| / 127
  std::vector<float> want(static_cast<size_t>(rows)), bound(static_cast<size_t>(rows));
  {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      cpu::dequantize_row(DType::Q4_0, a.data() + r * cols / 32 * 18, cols, 0, row.data());
      double s = 0, abs_w = 0;
      for (int64_t c = 0; c < cols; ++c) {
        s += double{row[static_cast<size_t>(c)]} * x[static_cast<size_t>(c)];
        abs_w += std::fabs(row[static_cast<size_t>(c)]);
      }
      want[static_cast<size_t>(r)] = static_cast<float>(s);
      bound[static_cast<size_t>(r)] = static_cast<float>(abs_w / 127 + 1e-4);
    }
  }
  const size_t before = cpu_packed_matrices();
  auto d1 = make_cpu_device(1), d2 = make_cpu_device(2);
  const DeviceTensor w1 = d1->upload_weight(view(a, rows, cols));
  EXPECT_EQ(cpu_packed_matrices(), before + 1);
  const DeviceTensor w2 = d2->upload_weight(view(a, rows, cols));
  EXPECT_EQ(cpu_packed_matrices(), before + 1) << "a second device packed the matrix again";
  d2->upload_weight(view(b, rows, cols));
  EXPECT_EQ(cpu_packed_matrices(), before + 2);

  std::vector<float> y1(static_cast<size_t>(rows)), y2(static_cast<size_t>(rows));
  d1->matmul(w1, DeviceTensor{}, x.data(), 1, y1.data());
  d2->matmul(w2, DeviceTensor{}, x.data(), 1, y2.data());
  EXPECT_EQ(y1, y2);
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_NEAR(y1[static_cast<size_t>(r)], want[static_cast<size_t>(r)], bound[static_cast<size_t>(r)]) << "row " << r;

  d1.reset();  // d2 still holds both
  EXPECT_EQ(cpu_packed_matrices(), before + 2);
  d2->matmul(w2, DeviceTensor{}, x.data(), 1, y2.data());
  EXPECT_EQ(y1, y2);
  d2.reset();
  EXPECT_EQ(cpu_packed_matrices(), before);
}

}  // namespace
}  // namespace hg::test
