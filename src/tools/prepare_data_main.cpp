// roformer-prepare-data: text files -> tokenized shards + meta.json. A separate executable
// that does not link LibTorch (SentencePiece's protobuf clashes with LibTorch's); `roformer
// prepare-data` runs it with the same arguments.
#include <CLI/CLI.hpp>

#include <iostream>

#include "roformer/common/errors.h"
#include "roformer/data/dataset_writer.h"
#include "roformer/data/sentencepiece_tokenizer.h"
#include "roformer/data/tokenizer_process.h"

int main(int argc, char** argv) {
  using namespace roformer;
  // `--tokenizer-service MODEL`: encode/decode for a LibTorch process (roformer finetune) on
  // stdin/stdout; see data/tokenizer_process.h.
  if (argc == 3 && std::string(argv[1]) == "--tokenizer-service") {
    try {
      const data::SentencePieceTokenizer tokenizer(argv[2]);
      return data::serve_tokenizer(tokenizer, 0, 1);
    } catch (const std::exception& e) {
      std::cerr << "error: " << e.what() << "\n";
      return kUserErrorExitCode;
    }
  }
  data::PrepareOptions o;
  CLI::App app{
      "Tokenize text files into binary shards of token ids plus meta.json.\n"
      "Each --input names its split by its file name: train.txt, valid.txt, test.txt."};
  app.name("roformer prepare-data");
  app.add_option("--input", o.inputs, "text files, one per split (train.txt, valid.txt, test.txt)")
      ->required()
      ->expected(1, -1);
  app.add_option("--tokenizer", o.tokenizer, "byte or sentencepiece")->capture_default_str();
  app.add_option("--vocab-size", o.vocab_size, "SentencePiece vocabulary size")->capture_default_str();
  app.add_option("--model-type", o.model_type, "SentencePiece model: bpe or unigram")->capture_default_str();
  app.add_option("--out", o.out, "output dataset directory")->required();
  app.add_option("--shard-tokens", o.shard_tokens, "tokens per shard file")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--document-separator", o.document_separator,
                 "a line equal to this text ends a document (the line is not tokenized); the document starts are "
                 "recorded in the dataset (data/README.md), e.g. --document-separator '<|endoftext|>'");
  app.add_flag("--force", o.force, "replace an existing output directory (only once the new one is complete)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kUserErrorExitCode;
  }
  if (app.count("--document-separator") > 0 && o.document_separator.empty()) {
    std::cerr << "error: --document-separator is empty; it names the line that ends a document (an empty one would "
                 "match every blank line), e.g. --document-separator '<|endoftext|>', or leave the option out\n";
    return kUserErrorExitCode;
  }
  try {
    const data::PrepareReport r = data::prepare_dataset(o);
    std::cout << "prepared " << o.out << " (" << o.tokenizer << ", vocabulary " << r.vocab_size << ") in " << r.seconds
              << " s\n";
    for (const auto& [split, n] : r.tokens_per_split) std::cout << "  " << split << ": " << n << " tokens\n";
    for (const auto& [split, n] : r.documents_per_split) std::cout << "  " << split << ": " << n << " documents\n";
  } catch (const UserError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kUserErrorExitCode;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
