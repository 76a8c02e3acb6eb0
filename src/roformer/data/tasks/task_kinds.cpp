// The one table from data.task.name to its generator (make_task_generator, declared in
// task_generator.h): each task family's maker, declared in task_kinds.h.
#include "roformer/data/tasks/task_kinds.h"

#include "roformer/common/errors.h"
#include "roformer/data/tasks/task_generator.h"

namespace roformer::data {

std::unique_ptr<TaskGenerator> make_task_generator(const config::TaskConfig& task, bool causal) {
  using config::TaskKind;
  switch (task.name) {
    case TaskKind::niah_single:
    case TaskKind::niah_multikey:
    case TaskKind::niah_multivalue:
    case TaskKind::niah_multiquery:
      return make_needle_task(task, causal);
    case TaskKind::variable_tracking:
      return make_variable_tracking_task(task, causal);
    case TaskKind::mqar:
      return make_mqar_task(task, causal);
    case TaskKind::flip_flop:
      return make_flip_flop_task(task, causal);
    case TaskKind::none:
      break;
    default:
      return make_algorithmic_task(task, causal);
  }
  throw UserError("data.task.name is none: this run reads the corpus at data.path, not a task");
}

}  // namespace roformer::data
