// libFuzzer target: the fine-tuning task readers (src/roformer/finetune/glue_tsv.cpp,
// triplets.cpp), which read files users download or write. The first byte picks the reader:
// its low 6 bits a GLUE task (cola ... wnli) or, past the last task, triplet JSONL; bit 6 a
// labelled split, bit 7 skip_malformed. The rest is the file. A bad file must end in a
// UserError; anything else escaping, a crash, or a result that breaks the readers' promises
// (labels in range, finite scores, increasing line numbers, non-empty triplet texts that
// survive a write and read back) is a bug.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "roformer/common/errors.h"
#include "roformer/finetune/glue_tsv.h"
#include "roformer/finetune/triplets.h"

using namespace roformer;
using namespace roformer::finetune;

namespace {

const std::string& scratch_path() {
  static const std::string path = "/tmp/roformer_fuzz_task_data." + std::to_string(getpid());
  return path;
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "broken promise: %s\n", what);
  std::abort();
}

void check_glue(const GlueTask& task, const GlueReadOptions& options) {
  GlueSplit split;
  try {
    split = read_glue_tsv(scratch_path(), task, options);
  } catch (const UserError&) {
    return;
  }
  check(!split.examples.empty(), "a split read without error has examples");
  int64_t previous = 0;
  for (const GlueExample& e : split.examples) {
    check(e.line > previous, "line numbers increase");
    previous = e.line;
    if (!options.labelled) continue;
    if (task.regression())
      check(std::isfinite(e.score), "regression scores are finite");
    else
      check(e.label >= 0 && e.label < static_cast<int64_t>(task.labels.size()), "labels are in range");
  }
}

void check_triplets() {
  std::vector<Triplet> triplets;
  try {
    triplets = read_triplets(scratch_path());
  } catch (const UserError&) {
    return;
  }
  check(!triplets.empty(), "a file read without error has triplets");
  std::string written;
  for (const Triplet& t : triplets) {
    check(!t.a.empty() && !t.b.empty() && !t.c.empty(), "triplet texts are non-empty");
    written += triplet_json(t) + "\n";
  }
  write(scratch_path(), written);
  const std::vector<Triplet> again = read_triplets(scratch_path());  // must not throw
  check(again.size() == triplets.size(), "written triplets read back in full");
  for (size_t i = 0; i < again.size(); ++i)
    check(again[i].a == triplets[i].a && again[i].b == triplets[i].b && again[i].c == triplets[i].c &&
              again[i].b_closer == triplets[i].b_closer,
          "written triplets read back unchanged");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  write(scratch_path(), std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  const std::vector<std::string> names = glue_task_names();
  const size_t pick = (mode & 0x3f) % (names.size() + 1);
  if (pick == names.size()) {
    check_triplets();
  } else {
    GlueReadOptions options;
    options.labelled = (mode & 0x40) != 0;
    options.skip_malformed = (mode & 0x80) != 0;
    check_glue(glue_task(names[pick]), options);
  }
  std::remove(scratch_path().c_str());
  return 0;
}
