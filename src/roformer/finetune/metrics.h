// Evaluation metrics of the GLUE tasks, as GLUE defines them (and as scikit-learn and SciPy
// compute them): accuracy, binary F1 of the positive class, Matthews correlation (CoLA),
// Pearson and Spearman correlation (STS-B, Spearman with average ranks for ties). Torch-free;
// the inputs are the predictions and gold labels of one evaluation split.
#pragma once

#include <cstdint>
#include <vector>

namespace roformer::finetune {

// Fraction of equal entries. Empty or mismatched inputs throw std::invalid_argument.
double accuracy(const std::vector<int64_t>& predicted, const std::vector<int64_t>& gold);

// F1 of the class `positive`: 2 TP / (2 TP + FP + FN); 0 when there is no positive at all.
double f1_binary(const std::vector<int64_t>& predicted, const std::vector<int64_t>& gold, int64_t positive = 1);

// Matthews correlation over any number of classes (Gorodkin's R_K, equal to the binary phi
// coefficient for two); 0 when either side has a single class, as scikit-learn returns.
double matthews_correlation(const std::vector<int64_t>& predicted, const std::vector<int64_t>& gold);

// Pearson's r; 0 when either side is constant.
double pearson(const std::vector<double>& x, const std::vector<double>& y);

// Spearman's rho: Pearson's r of the ranks, tied values sharing their average rank.
double spearman(const std::vector<double>& x, const std::vector<double>& y);

// 1-based ranks with ties averaged (SciPy's rankdata, method "average").
std::vector<double> average_ranks(const std::vector<double>& x);

}  // namespace roformer::finetune
