// PaTH's sweep across key blocks (see path.h) as one autograd Function: each query block's rows,
// already carried to their block's start, score the carried keys of the block before, then take
// that block's product, and so on back to the first block. Written as LibTorch ops each distance
// would slice the key blocks and the rows, and every slice's backward would fill and copy a
// full-size gradient; here the forward writes into one buffer and the backward adds each
// distance's gradients into place.
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

}  // namespace roformer::model
