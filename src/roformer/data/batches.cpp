// Training batches and evaluation windows (see batches.h).
#include "roformer/data/batches.h"

#include <torch/torch.h>

#include <algorithm>

#include "roformer/common/errors.h"
#include "roformer/data/counter_rng.h"
#include "roformer/data/document_index.h"
#include "roformer/data/document_packing.h"
#include "roformer/data/random_positions.h"

namespace roformer::data {
namespace {

constexpr uint64_t kMaskStream = 0x6d61736bULL;  // distinct counter streams per use
constexpr uint64_t kOffsetStream = 0x6f666673ULL;

}  // namespace

MaskingRule MaskingRule::from(const DatasetMeta& meta, const config::DataConfig& data) {
  MaskingRule r;
  r.mask_prob = data.mask_prob;
  r.mask_token_frac = data.mask_token_frac;
  r.random_token_frac = data.random_token_frac;
  r.mask_id = meta.mask_id();
  r.is_special.assign(static_cast<size_t>(meta.vocab_size), 0);
  for (const auto& kv : meta.special_ids) r.is_special[static_cast<size_t>(kv.second)] = 1;
  for (int64_t id = 0; id < meta.vocab_size; ++id)
    if (!r.is_special[static_cast<size_t>(id)]) r.regular_ids.push_back(id);
  return r;
}

bool mlm_mask_position(const MaskingRule& rule, uint64_t h, int64_t* id) {
  if (rule.is_special[static_cast<size_t>(*id)] || to_unit(h) >= rule.mask_prob) return false;
  const uint64_t h2 = mix64(h);
  const double u = to_unit(h2);
  if (u < rule.mask_token_frac) {
    *id = rule.mask_id;
  } else if (u < rule.mask_token_frac + rule.random_token_frac) {
    *id = rule.regular_ids[mix64(h2) % rule.regular_ids.size()];
  }  // else: kept unchanged (but still predicted)
  return true;
}

TrainBatcher::TrainBatcher(std::shared_ptr<const TokenStore> store, config::Objective objective, int64_t seq_len,
                           int64_t local_batch, int rank, int world, uint64_t seed, config::DataSampling sampling,
                           MaskingRule rule)
    : store_(std::move(store)),
      objective_(objective),
      seq_len_(seq_len),
      local_batch_(local_batch),
      rank_(rank),
      world_(world),
      seed_(seed),
      sampling_(sampling),
      rule_(std::move(rule)),
      need_(objective == config::Objective::causal_lm ? seq_len + 1 : seq_len) {
  if (store_->size() < need_)
    throw UserError("split '" + store_->split() + "' has " + std::to_string(store_->size()) +
                    " tokens, fewer than one training sequence of " + std::to_string(need_) + "; lower data.seq_len");
  if (sampling_ == config::DataSampling::packed) {
    const int64_t chunks = (store_->size() - (need_ - seq_len_)) / seq_len_;
    sampler_ = std::make_unique<DistributedSampler>(chunks, world_, rank_, seed_);
  }
  if (objective_ == config::Objective::mlm && rule_.mask_id < 0)
    throw UserError("the dataset has no [MASK] token, so it cannot train an MLM; use model.objective=causal_lm");
}

void TrainBatcher::set_packing(config::DataPacking packing, int64_t pad_id) {
  packing_ = packing;
  pad_id_ = pad_id;
  const std::vector<int64_t>& docs = store_->document_starts();
  if (packing_ != config::DataPacking::stream && docs.empty())
    throw std::logic_error("TrainBatcher::set_packing: the split has no document starts");
  if (packing_ == config::DataPacking::none && sampling_ == config::DataSampling::packed)
    sampler_ = std::make_unique<DistributedSampler>(static_cast<int64_t>(docs.size()), world_, rank_, seed_);
}

int64_t TrainBatcher::packed_offset(int64_t q) const {
  const int64_t item = sampler_->stream_index(q);
  return packing_ == config::DataPacking::none ? store_->document_starts()[static_cast<size_t>(item)] : item * seq_len_;
}

// Row i of this rank is row global_row(i) of the single-process batch of the same step: ranks
// take contiguous slices of random offsets and strided slices of the sampler's order. Keying
// MLM masks by it makes W ranks of b rows see exactly the masks of one process with W*b rows.
int64_t TrainBatcher::global_row(int64_t i) const {
  return sampling_ == config::DataSampling::packed ? rank_ + world_ * i : rank_ * local_batch_ + i;
}

std::vector<int64_t> TrainBatcher::offsets(int64_t step) const {
  std::vector<int64_t> out;
  const bool whole_documents = packing_ == config::DataPacking::none;
  const std::vector<int64_t>& docs = store_->document_starts();
  for (int64_t i = 0; i < local_batch_; ++i) {
    const int64_t j = global_row(i);
    if (sampling_ == config::DataSampling::random) {
      const uint64_t span = whole_documents ? docs.size() : static_cast<uint64_t>(store_->size() - need_ + 1);
      const uint64_t draw =
          hash_counters(seed_, {kOffsetStream, static_cast<uint64_t>(step), static_cast<uint64_t>(j)}) % span;
      out.push_back(whole_documents ? docs[draw] : static_cast<int64_t>(draw));
    } else {
      out.push_back(packed_offset(step * local_batch_ + i));  // this rank's shard of each epoch
    }
  }
  return out;
}

int64_t TrainBatcher::read_row(int64_t i, int64_t start, Batch& out, std::vector<int64_t>& buf) const {
  const int64_t L = seq_len_;
  const bool causal = objective_ == config::Objective::causal_lm;
  int64_t* row = out.input_ids.data_ptr<int64_t>() + i * L;
  int64_t* trow = out.targets.data_ptr<int64_t>() + i * L;
  const std::vector<int64_t>& docs = store_->document_starts();
  int64_t inputs = L, available = need_;  // tokens that are inputs; tokens read
  if (packing_ == config::DataPacking::none) {
    const DocumentSpan doc = document_span(docs, store_->size(), document_of(docs, start));
    available = std::min(doc.tokens, need_);
    inputs = document_row_inputs(doc.tokens, L, causal);
    std::fill(row, row + L, pad_id_);
    int64_t* keep = out.key_keep.data_ptr<int64_t>() + i * L;
    std::fill(keep, keep + inputs, 1);
  }
  store_->read(start, available, buf.data());
  std::copy(buf.begin(), buf.begin() + inputs, row);
  std::vector<int64_t> pieces;
  if (packing_ == config::DataPacking::documents) {
    pieces = document_starts_in_row(docs, start, need_);
    fill_document_pieces(pieces, L, out.segments.data_ptr<int64_t>() + i * L,
                         out.positions.data_ptr<int64_t>() + i * L);
  }
  if (!causal) return inputs;
  for (int64_t p = 0; p < inputs && p + 1 < available; ++p) {
    if (!pieces.empty() && next_token_starts_document(pieces, p)) continue;
    trow[p] = buf[static_cast<size_t>(p + 1)];
    ++out.scored;
  }
  return inputs;
}

void TrainBatcher::mask_row(int64_t step, int64_t i, int64_t inputs, Batch& out) const {
  int64_t* row = out.input_ids.data_ptr<int64_t>() + i * seq_len_;
  int64_t* trow = out.targets.data_ptr<int64_t>() + i * seq_len_;
  const uint64_t j = static_cast<uint64_t>(global_row(i));
  for (int64_t p = 0; p < inputs; ++p) {
    const int64_t original = row[p];
    const uint64_t h = hash_counters(seed_, {kMaskStream, static_cast<uint64_t>(step), j, static_cast<uint64_t>(p)});
    if (mlm_mask_position(rule_, h, &row[p])) {
      trow[p] = original;
      ++out.scored;
    }
  }
}

Batch TrainBatcher::batch(int64_t step) const {
  const std::vector<int64_t> starts = offsets(step);
  const int64_t b = local_batch_, L = seq_len_;
  Batch out;
  out.input_ids = torch::empty({b, L}, torch::kLong);
  out.targets = torch::full({b, L}, -100, torch::kLong);
  if (packing_ == config::DataPacking::documents) {
    out.segments = torch::empty({b, L}, torch::kLong);
    out.positions = torch::empty({b, L}, torch::kLong);
  }
  if (packing_ == config::DataPacking::none) out.key_keep = torch::zeros({b, L}, torch::kLong);
  std::vector<int64_t> buf(static_cast<size_t>(need_));
  for (int64_t i = 0; i < b; ++i) {
    const int64_t inputs = read_row(i, starts[static_cast<size_t>(i)], out, buf);
    if (objective_ == config::Objective::mlm) mask_row(step, i, inputs, out);
  }
  // A batch whose rows each hold one document needs no document mask (its segments are all 0
  // and its positions 0..L-1, the defaults), one without padding no padding mask: attention
  // then keeps its unmasked kernels.
  if (out.segments.defined() && out.segments.max().item<int64_t>() == 0) {
    out.segments = torch::Tensor();
    out.positions = torch::Tensor();
  }
  if (out.key_keep.defined() && out.key_keep.min().item<int64_t>() == 1) out.key_keep = torch::Tensor();
  if (positions_max_ > 0) {
    std::vector<int64_t> rows(static_cast<size_t>(b));
    for (int64_t i = 0; i < b; ++i) rows[static_cast<size_t>(i)] = global_row(i);
    out.positions = random_positions(rows, L, positions_max_, seed_, step);
  }
  if (out.scored == 0 && objective_ == config::Objective::mlm) {  // score something: the first regular token
    int64_t* ids = out.input_ids.data_ptr<int64_t>();
    int64_t* tg = out.targets.data_ptr<int64_t>();
    const int64_t* keep = out.key_keep.defined() ? out.key_keep.data_ptr<int64_t>() : nullptr;
    for (int64_t k = 0; k < b * L; ++k)
      if ((!keep || keep[k]) && !rule_.is_special[static_cast<size_t>(ids[k])]) {
        tg[k] = ids[k];
        ids[k] = rule_.mask_id;
        out.scored = 1;
        break;
      }
  }
  return out;
}

EvalWindows::EvalWindows(std::shared_ptr<const TokenStore> store, config::Objective objective, int64_t length,
                         config::EvalProtocol protocol, int64_t stride, int64_t max_tokens, int64_t batch_size,
                         int rank, int world, uint64_t mask_seed, MaskingRule rule)
    : store_(std::move(store)),
      objective_(objective),
      length_(length),
      batch_size_(batch_size),
      rank_(rank),
      world_(world),
      mask_seed_(mask_seed),
      rule_(std::move(rule)) {
  const bool causal = objective == config::Objective::causal_lm;
  const int64_t N = store_->size();
  const int64_t need = causal ? length + 1 : length;
  if (N < need)
    throw UserError("evaluation length " + std::to_string(length) + " needs " + std::to_string(need) +
                    " tokens but split '" + store_->split() + "' has " + std::to_string(N) +
                    "; evaluate shorter lengths or use a larger split");
  const int64_t step = protocol == config::EvalProtocol::chunks ? length : (stride > 0 ? stride : length / 2);
  if (step <= 0 || step > length)
    throw UserError("eval.stride " + std::to_string(stride) + " must be in [1, " + std::to_string(length) + "]");
  // Positions scored: MLM tokens [0, N); causal targets [1, N). Windows are always full length:
  // the last one is aligned to the end of the split and scores only what is still unscored.
  const int64_t first = causal ? 1 : 0, end = N;
  int64_t scored_upto = first;  // next position to score
  int64_t covered = 0;
  for (int64_t start = 0; scored_upto < end; start += step) {
    int64_t s = std::min(start, N - need);
    const int64_t window_end = causal ? s + length + 1 : s + length;  // one past the last scorable position
    EvalWindow w{s, scored_upto, std::min(window_end, end)};
    if (w.score_to <= w.score_from) continue;
    windows_.push_back(w);
    covered += w.score_to - w.score_from;
    scored_upto = w.score_to;
    if (max_tokens > 0 && covered >= max_tokens) break;
  }
  for (int64_t i = rank_; i < static_cast<int64_t>(windows_.size()); i += world_) mine_.push_back(i);
}

int64_t EvalWindows::num_batches() const {
  return (static_cast<int64_t>(mine_.size()) + batch_size_ - 1) / batch_size_;
}

Batch EvalWindows::batch(int64_t index) const {
  const int64_t lo = index * batch_size_;
  const int64_t b = std::min<int64_t>(batch_size_, static_cast<int64_t>(mine_.size()) - lo);
  const bool causal = objective_ == config::Objective::causal_lm;
  const int64_t L = length_, need = causal ? L + 1 : L;
  Batch out;
  out.input_ids = torch::empty({b, L}, torch::kLong);
  out.targets = torch::full({b, L}, -100, torch::kLong);
  int64_t* ids = out.input_ids.data_ptr<int64_t>();
  int64_t* tg = out.targets.data_ptr<int64_t>();
  std::vector<int64_t> buf(static_cast<size_t>(need));
  for (int64_t i = 0; i < b; ++i) {
    const EvalWindow& w = windows_[static_cast<size_t>(mine_[static_cast<size_t>(lo + i)])];
    store_->read(w.start, need, buf.data());
    for (int64_t p = 0; p < L; ++p) {
      const int64_t pos = w.start + p;  // absolute position of input p
      int64_t id = buf[static_cast<size_t>(p)];
      if (causal) {
        const int64_t target_pos = pos + 1;
        if (target_pos >= w.score_from && target_pos < w.score_to) {
          tg[i * L + p] = buf[static_cast<size_t>(p + 1)];
          ++out.scored;
        }
      } else {
        // Masks depend only on the absolute position: identical inputs in every window and run.
        const uint64_t h = hash_counters(mask_seed_, {kMaskStream, static_cast<uint64_t>(pos)});
        const int64_t original = id;
        if (mlm_mask_position(rule_, h, &id) && pos >= w.score_from && pos < w.score_to) {
          tg[i * L + p] = original;
          ++out.scored;
        }
      }
      ids[i * L + p] = id;
    }
  }
  return out;
}

}  // namespace roformer::data
