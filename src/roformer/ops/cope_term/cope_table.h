// CoPE's position table read by causal rows: the queries' products with the table e, formed only
// where a causal row's count can reach. Row i counts the gates of keys 0..i, each below 1, so its
// count never exceeds i + 1 and entries p > i + 1 of its row are never read; forming the products
// in blocks of rows up to each block's last reachable entry halves the three S x P products (the
// forward, d q and d e) at P = S.
#pragma once

#include <torch/types.h>

namespace roformer::ops {

// Rows are formed in blocks of this many: a block's rows all hold the entries its last row can read.
constexpr int64_t kCausalTableBlockRows = 128;

// q [B, H, S, D], table [D, P] (same dtype and device): out [B, H, S, P] with
// out[.., i, p] = q[.., i, :] . table[:, p] for p <= b + 1, b the last row of i's block of
// kCausalTableBlockRows (so for every p <= i + 1), and 0 beyond; differentiable in both as that
// formula (the zeros carry no gradient). For causal attention only: a row that sees keys after it
// could count past i + 1.
//
// row_totals (optional, [B, H, S]): CoPE's gate total of each row, which its tile term writes in
// its forward (ops::CopeTerm::totals). A row's count never passes its total, so its incoming
// gradient is zero past entry floor(total) + 1, and the backward's products stop there too (an
// entry later, for a recount's rounding). Read at the backward; a NaN (not written) leaves the
// block's products whole.
torch::Tensor causal_table_products(const torch::Tensor& q, const torch::Tensor& table,
                                    const torch::Tensor& row_totals = {});

}  // namespace roformer::ops
