// PaTH's sweep across key blocks (see path.h) and the layout of its score blocks as rows, each an
// autograd Function. The sweep: each query block's rows, already carried to their block's start,
// score the carried keys of the block before, then take that block's product, and so on back to
// the first block. Written as LibTorch ops each distance would slice the key blocks and the rows,
// and every slice's backward would fill and copy a full-size gradient; here the forward writes
// into one buffer and the backward adds each distance's gradients into place. The rows: on the
// CPU each block is copied to its place (and its gradient back), where a gather and a permute
// would copy everything twice each way.
#pragma once

#include <torch/types.h>

#include <vector>

namespace roformer::model {

// One distance d of the sweep: the query blocks from `lowest` (counted from the first query
// block) that have a key block d back, `count` of them, against key blocks from `source`; their
// scores start at block `base` of the sweep's output.
struct PathSweepStep {
  int64_t lowest = 0, count = 0, source = 0, base = 0;
};
// The steps for distances 1, 2, ... of query blocks [first, first + nq).
std::vector<PathSweepStep> path_sweep_steps(int64_t first, int64_t nq);

// rows [nq, BH, b, D]: query blocks first .. first + nq - 1 carried to their block's start;
// carried [n, BH, b, D]: each block's keys carried to its end; product [n, BH, D, D]: each
// block's product (block-major, contiguous). -> [total, BH, b, b]: the score blocks of every
// step of path_sweep_steps(first, nq), in order (total = the last step's base + count).
torch::Tensor path_sweep(const torch::Tensor& rows, const torch::Tensor& carried, const torch::Tensor& product,
                         int64_t first);

// The score blocks as rows by keys, [B, BH / B, nq * b, n * b] (autograd Function; each block copied
// to its place and its gradient back): own [nq, BH, b, b] the query blocks' own blocks, earlier
// path_sweep's output for the same query blocks; key blocks after a query's are 0.
torch::Tensor path_rows(const torch::Tensor& own, const torch::Tensor& earlier, int64_t first, int64_t n, int64_t B);
// The same by LibTorch ops (a gather of whole blocks and a permute), on any device: what
// path_rows runs off the CPU.
torch::Tensor path_rows_by_gather(const torch::Tensor& own, const torch::Tensor& earlier, int64_t first, int64_t n,
                                  int64_t B);

}  // namespace roformer::model
