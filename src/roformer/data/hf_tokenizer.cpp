// The Hugging Face tokenizer service: a short Python program, passed with -c, around
// tokenizers.Tokenizer (see hf_tokenizer.h).
#include "roformer/data/hf_tokenizer.h"

#include <nlohmann/json.hpp>

#include "roformer/common/build_info.h"
#include "roformer/common/errors.h"
#include "roformer/common/files.h"
#include "roformer/data/tokenizer_process.h"

namespace roformer::data {
namespace {

// Header line first, then one JSON answer per request line (texts as hex, as ProcessTokenizer sends
// them). Encoding adds no special tokens, as scripts/data/prepare_hf_data.py encoded the corpus.
constexpr const char* kServiceProgram = R"PY(
import json, sys
try:
    from tokenizers import Tokenizer
except ImportError:
    sys.stderr.write("the Python package 'tokenizers' is missing in " + sys.executable +
                     ": pip install tokenizers, or set ROFORMER_PYTHON to a Python that has it\n")
    sys.exit(3)
path, special = sys.argv[1], json.loads(sys.argv[2])
try:
    tok = Tokenizer.from_file(path)
except Exception as e:
    sys.stderr.write("cannot load the tokenizer '%s': %s\n" % (path, e))
    sys.exit(3)
out = sys.stdout
out.write(json.dumps({"name": "hf", "vocab_size": tok.get_vocab_size(with_added_tokens=True),
                      "special_ids": special}) + "\n")
out.flush()
for line in sys.stdin:
    try:
        q = json.loads(line)
        if "encode" in q:
            text = bytes.fromhex(q["encode"]).decode("utf-8", errors="replace")
            answer = {"ids": tok.encode(text, add_special_tokens=False).ids}
        else:
            answer = {"text": tok.decode(q["decode"], skip_special_tokens=False).encode("utf-8").hex()}
    except Exception as e:
        answer = {"error": str(e)}
    out.write(json.dumps(answer) + "\n")
    out.flush()
)PY";

}  // namespace

std::unique_ptr<Tokenizer> make_hf_tokenizer(const std::string& tokenizer_json,
                                             const std::map<std::string, int64_t>& special_ids) {
  if (!path_exists(tokenizer_json))
    throw UserError("the dataset's Hugging Face tokenizer '" + tokenizer_json +
                    "' is missing; re-create the dataset with scripts/data/prepare_hf_data.py");
  const std::string python =
      checked_service_python("the Hugging Face tokenizer needs Python with the tokenizers package");
  const std::string what = "the Hugging Face tokenizer service (" + python + " with the tokenizers package)";
  return std::make_unique<ProcessTokenizer>(
      std::vector<std::string>{python, "-c", kServiceProgram, tokenizer_json, nlohmann::json(special_ids).dump()},
      tokenizer_json, what);
}

}  // namespace roformer::data
