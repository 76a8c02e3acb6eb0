// Tuning bench for the vector RoPE kernel (no LibTorch; needs a GPU): times rows-per-thread and
// blocks-per-SM choices of rope_vector_kernel on the benchmark shapes against a device copy of
// the same bytes (cudaMemcpyAsync of q and k), in place, half and interleaved pairing, and checks
// that every variant writes the same bits as the default one (table variants: as the default
// reading the same table). GB/s = bytes of q and k read +
// written over the median of 7 samples of 50 back-to-back launches (three input sets rotated).
// Not part of the CMake build; from the project root:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -Isrc \
//     tests/benchmarks/rope_kernel_variants.cu -o build/rope_kernel_variants && build/rope_kernel_variants
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "roformer/ops/rope/rope_cuda_kernels.cuh"

using namespace roformer::ops;
using T = __nv_bfloat16;
constexpr int VEC = 8;

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

struct Shape {
  int64_t B, S, H, D;
};

using Launch = bool (*)(const RopeLaunch&, const cuda_elem::StreamLauncher&);

struct Buffers {
  std::vector<void*> q, k;
  size_t bytes = 0;
};

RopeLaunch describe(const Shape& sh, void* q, void* k, const int64_t* pos, const double* inv, bool interleaved,
                    const float* table) {
  RopeLaunch p;
  p.cos_sin = table;  // nullptr: computed; else [S, D] (cos, sin) rows read from L2
  p.cos_sin_rows = table != nullptr ? sh.S : 0;
  p.num_tensors = 2;
  p.dtype = KernelDType::bf16;
  p.batch = sh.B, p.seq = sh.S, p.head_dim = sh.D, p.rotary_dim = sh.D;
  p.interleaved = interleaved;
  p.inplace = true;
  p.positions = pos;
  p.position_mode = RopePositionMode::shared;
  p.position_stride_s = 1;
  p.inv_freq = inv;
  void* ptrs[2] = {q, k};
  for (int j = 0; j < 2; ++j) {
    RopeTensorArgs& t = p.tensors[j];
    t.in = t.out = ptrs[j];
    t.heads = sh.H;
    const int64_t st[4] = {sh.S * sh.H * sh.D, sh.H * sh.D, sh.D, 1};
    std::memcpy(t.in_stride, st, sizeof st);
    std::memcpy(t.out_stride, st, sizeof st);
  }
  return p;
}

template <typename F>
double median_seconds(F&& body, int launches) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  body();  // warm-up
  std::vector<float> ms;
  for (int r = 0; r < 7; ++r) {
    cudaEventRecord(a);
    for (int i = 0; i < launches; ++i) body();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[3] / 1e3 / launches;
}

}  // namespace

int main() {
  const std::vector<Shape> shapes{{1, 8192, 32, 128}, {4, 4096, 32, 128}, {32, 512, 12, 64}, {8, 2048, 16, 64}};
  struct Variant {
    const char* name;
    Launch half, interleaved;
    bool table;  // read (cos, sin) from a table (the model's setting) instead of computing them
  };
  const std::vector<Variant> variants{
      {"default", launch_vector<T, VEC, false>, launch_vector<T, VEC, true>, false},
      {"default table", launch_vector<T, VEC, false>, launch_vector<T, VEC, true>, true},
      {"rows2 min2", launch_vector<T, VEC, false, 2, 2>, launch_vector<T, VEC, true, 2, 2>, false},
      {"rows4 min3", launch_vector<T, VEC, false, 4, 3>, launch_vector<T, VEC, true, 4, 3>, false},
      {"rows4 min4", launch_vector<T, VEC, false, 4, 4>, launch_vector<T, VEC, true, 4, 4>, false},
      {"rows4 min4 table", launch_vector<T, VEC, false, 4, 4>, launch_vector<T, VEC, true, 4, 4>, true},
      {"rows2 min4 table", launch_vector<T, VEC, false, 2, 4>, launch_vector<T, VEC, true, 2, 4>, true},
      {"rows8 min1", launch_vector<T, VEC, false, 8, 1>, launch_vector<T, VEC, true, 8, 1>, false},
      {"rows2 min4", launch_vector<T, VEC, false, 2, 4>, launch_vector<T, VEC, true, 2, 4>, false},
      {"rows1 min4", launch_vector<T, VEC, false, 1, 4>, launch_vector<T, VEC, true, 1, 4>, false},
  };
  std::printf("| shape | copy GB/s |");
  for (const auto& v : variants) std::printf(" %s half | %s interleaved |", v.name, v.name);
  std::printf("\n");
  for (const Shape& sh : shapes) {
    const size_t n = sh.B * sh.S * sh.H * sh.D, bytes = n * sizeof(T);
    std::vector<uint16_t> host(n);
    uint32_t seed = 12345;
    for (auto& h : host) {  // random bf16 in [-2, 2)
      seed = seed * 1664525u + 1013904223u;
      const float f = (static_cast<float>(seed >> 8) / 16777216.0f) * 4.0f - 2.0f;
      uint32_t u;
      std::memcpy(&u, &f, 4);
      h = static_cast<uint16_t>(u >> 16);
    }
    Buffers buf;
    for (int i = 0; i < 3; ++i) {
      void *q, *k;
      check(cudaMalloc(&q, bytes), "malloc");
      check(cudaMalloc(&k, bytes), "malloc");
      cudaMemcpy(q, host.data(), bytes, cudaMemcpyHostToDevice);
      cudaMemcpy(k, host.data(), bytes, cudaMemcpyHostToDevice);
      buf.q.push_back(q), buf.k.push_back(k);
    }
    void *dq, *dk;
    cudaMalloc(&dq, bytes), cudaMalloc(&dk, bytes);
    std::vector<int64_t> pos(sh.S);
    for (int64_t s = 0; s < sh.S; ++s) pos[s] = s;
    std::vector<double> inv(sh.D / 2);
    for (int64_t i = 0; i < sh.D / 2; ++i) inv[i] = std::pow(10000.0, -2.0 * i / sh.D);
    std::vector<float> table(sh.S * sh.D);  // the rows ops::rope_table() builds on the host
    for (int64_t s = 0; s < sh.S; ++s) rope_table_row(s, 1.0, inv.data(), sh.D / 2, table.data() + s * sh.D);
    int64_t* dpos;
    double* dinv;
    float* dtable;
    cudaMalloc(&dpos, sh.S * 8), cudaMalloc(&dinv, inv.size() * 8), cudaMalloc(&dtable, table.size() * 4);
    cudaMemcpy(dtable, table.data(), table.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dpos, pos.data(), sh.S * 8, cudaMemcpyHostToDevice);
    cudaMemcpy(dinv, inv.data(), inv.size() * 8, cudaMemcpyHostToDevice);
    const double traffic = 2.0 * 2.0 * static_cast<double>(bytes);  // q and k, read + write
    int it = 0;
    const double copy_s = median_seconds(
        [&] {
          const int i = it++ % 3;
          cudaMemcpyAsync(dq, buf.q[i], bytes, cudaMemcpyDeviceToDevice);
          cudaMemcpyAsync(dk, buf.k[i], bytes, cudaMemcpyDeviceToDevice);
        },
        50);
    std::printf("| %lldx%lldx%lldx%lld | %.0f |", (long long)sh.B, (long long)sh.S, (long long)sh.H, (long long)sh.D,
                traffic / copy_s / 1e9);
    // Output bits of q from a fresh input: every variant must equal the default one.
    auto output_of = [&](Launch launch, bool il, bool use_table) {
      std::vector<uint16_t> out(n);
      cudaMemcpy(dq, host.data(), bytes, cudaMemcpyHostToDevice);
      cudaMemcpy(dk, host.data(), bytes, cudaMemcpyHostToDevice);
      launch(describe(sh, dq, dk, dpos, dinv, il, use_table ? dtable : nullptr), cuda_elem::StreamLauncher{nullptr});
      check(cudaDeviceSynchronize(), "variant");
      cudaMemcpy(out.data(), dq, bytes, cudaMemcpyDeviceToHost);
      return out;
    };
    // References: the default variant computing, and (for table variants) reading the table.
    const std::vector<uint16_t> ref_half = output_of(variants[0].half, false, false);
    const std::vector<uint16_t> ref_il = output_of(variants[0].interleaved, true, false);
    const std::vector<uint16_t> ref_half_t = output_of(variants[0].half, false, true);
    const std::vector<uint16_t> ref_il_t = output_of(variants[0].interleaved, true, true);
    for (const auto& v : variants) {
      for (bool il : {false, true}) {
        const Launch launch = il ? v.interleaved : v.half;
        const double s = median_seconds(
            [&] {
              const int i = it++ % 3;
              launch(describe(sh, buf.q[i], buf.k[i], dpos, dinv, il, v.table ? dtable : nullptr),
                     cuda_elem::StreamLauncher{nullptr});
            },
            50);
        const bool same =
            output_of(launch, il, v.table) == (v.table ? (il ? ref_il_t : ref_half_t) : (il ? ref_il : ref_half));
        std::printf(" %.0f%s |", traffic / s / 1e9, same ? "" : " (BITS DIFFER)");
      }
    }
    std::printf("\n");
    for (int i = 0; i < 3; ++i) cudaFree(buf.q[i]), cudaFree(buf.k[i]);
    cudaFree(dq), cudaFree(dk), cudaFree(dpos), cudaFree(dinv), cudaFree(dtable);
  }
  return 0;
}
