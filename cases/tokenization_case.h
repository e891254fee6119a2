/*
 * tokenization_case.h - evaluating a chapter 01 case file (the work behind
 * `build/01_tokenization --case IN --out OUT`), kept in the library so the
 * fuzzer (fuzz/) can call it as the tests call the other chapters' ones.
 *
 * Ops and their tensors (see reference/ch01_tokenization.py):
 *
 *     char_encode        corpus, text -> codepoints, ids, decoded
 *     word_encode        corpus, text (min_freq) -> vocab, counts, ids, decoded
 *     bpe_train_encode   corpus, text (vocab_size) -> merges, ids, decoded
 *     taylor_source      text (length) -> ids, sequence, decoded
 *     taylor_target      text (length) -> ids, sequence, decoded
 *     batch              texts (side, length) -> batch, lengths, decoded
 *
 * Texts travel as U8 tensors; lists of words or lines as one U8 tensor
 * joined by newlines; ids as I64. Every problem (missing tensor, wrong dtype,
 * bad option, text the tokenizer cannot encode) is one line in err naming the
 * file, and -1; run_case_file then writes no output file.
 */
#ifndef TOKENIZATION_CASE_H
#define TOKENIZATION_CASE_H

#include "safetensors.h"

int tokenization_case_eval(const TensorFile *in, TensorFile *out, Error *err);

#endif
