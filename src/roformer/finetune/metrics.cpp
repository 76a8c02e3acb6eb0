// GLUE metrics (see metrics.h).
#include "roformer/finetune/metrics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <stdexcept>

namespace roformer::finetune {
namespace {

template <typename T>
void check_pair(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.empty() || a.size() != b.size())
    throw std::invalid_argument("metric inputs must be non-empty and of equal length (got " + std::to_string(a.size()) +
                                " and " + std::to_string(b.size()) + ")");
}

}  // namespace

double accuracy(const std::vector<int64_t>& predicted, const std::vector<int64_t>& gold) {
  check_pair(predicted, gold);
  size_t equal = 0;
  for (size_t i = 0; i < gold.size(); ++i) equal += predicted[i] == gold[i];
  return static_cast<double>(equal) / static_cast<double>(gold.size());
}

double f1_binary(const std::vector<int64_t>& predicted, const std::vector<int64_t>& gold, int64_t positive) {
  check_pair(predicted, gold);
  double tp = 0, fp = 0, fn = 0;
  for (size_t i = 0; i < gold.size(); ++i) {
    const bool p = predicted[i] == positive, g = gold[i] == positive;
    tp += p && g;
    fp += p && !g;
    fn += !p && g;
  }
  return tp == 0 ? 0.0 : 2 * tp / (2 * tp + fp + fn);
}

// R_K = (c s - sum_k p_k t_k) / sqrt((s^2 - sum_k p_k^2)(s^2 - sum_k t_k^2)) with c correct
// predictions, s samples, p_k and t_k the times class k was predicted and was true.
double matthews_correlation(const std::vector<int64_t>& predicted, const std::vector<int64_t>& gold) {
  check_pair(predicted, gold);
  std::map<int64_t, double> p, t;
  double c = 0;
  for (size_t i = 0; i < gold.size(); ++i) {
    p[predicted[i]] += 1;
    t[gold[i]] += 1;
    c += predicted[i] == gold[i];
  }
  const double s = static_cast<double>(gold.size());
  double pt = 0, pp = 0, tt = 0;
  for (const auto& [k, n] : p) {
    pp += n * n;
    const auto it = t.find(k);
    if (it != t.end()) pt += n * it->second;
  }
  for (const auto& [k, n] : t) tt += n * n;
  const double denominator = std::sqrt((s * s - pp) * (s * s - tt));
  return denominator == 0 ? 0.0 : (c * s - pt) / denominator;
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  check_pair(x, y);
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n, my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxx == 0 || syy == 0 ? 0.0 : sxy / std::sqrt(sxx * syy);
}

std::vector<double> average_ranks(const std::vector<double>& x) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> rank(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    const double shared = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;  // ranks i+1..j+1
    for (size_t k = i; k <= j; ++k) rank[order[k]] = shared;
    i = j + 1;
  }
  return rank;
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  check_pair(x, y);
  return pearson(average_ranks(x), average_ranks(y));
}

}  // namespace roformer::finetune
