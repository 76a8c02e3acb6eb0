// The task families behind make_task_generator (task_generator.cpp): RULER's needles and
// variable tracking, Zoology's MQAR (retrieval_tasks.cpp); flip-flop and the algorithmic tasks
// of Ruoss et al. and Kazemnejad et al. (algorithmic_tasks.cpp). Each throws UserError naming
// the data.task setting a configuration cannot satisfy.
#pragma once

#include <memory>

#include "roformer/data/tasks/task_generator.h"

namespace roformer::data {

std::unique_ptr<TaskGenerator> make_needle_task(const config::TaskConfig& task, bool causal);
std::unique_ptr<TaskGenerator> make_variable_tracking_task(const config::TaskConfig& task, bool causal);
std::unique_ptr<TaskGenerator> make_mqar_task(const config::TaskConfig& task, bool causal);
std::unique_ptr<TaskGenerator> make_flip_flop_task(const config::TaskConfig& task, bool causal);
std::unique_ptr<TaskGenerator> make_algorithmic_task(const config::TaskConfig& task, bool causal);

}  // namespace roformer::data
