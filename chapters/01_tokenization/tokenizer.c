/*
 * tokenizer.c - see tokenizer.h.
 */
#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "char_tokenizer.h"
#include "taylor.h"
#include "word_tokenizer.h"

const char *const TOKENIZER_NAMES[TOKENIZER_KINDS] = {"char", "word", "bpe", "taylor-source",
                                                      "taylor-target"};

int tokenizer_kind_parse(const char *name, TokenizerKind *kind, Error *err)
{
    for (int k = 0; k < TOKENIZER_KINDS; k++)
        if (strcmp(name, TOKENIZER_NAMES[k]) == 0) {
            *kind = (TokenizerKind)k;
            return 0;
        }
    return error_set(err, "unknown tokenizer '%s' (the kinds are char, word, bpe, "
                          "taylor-source and taylor-target)", name);
}

const Vocab *tokenizer_vocab(const Tokenizer *tk)
{
    return tk->kind == TOKENIZER_BPE ? &tk->bpe.vocab : &tk->vocab;
}

int tokenizer_build(Tokenizer *tk, TokenizerKind kind, const Text *corpus, int64_t vocab_size,
                    int min_freq, Error *err)
{
    memset(tk, 0, sizeof *tk);
    tk->kind = kind;
    switch (kind) {
    case TOKENIZER_CHAR: return char_vocab_build(&tk->vocab, corpus->data, corpus->len, err);
    case TOKENIZER_WORD:
        return word_vocab_build(&tk->vocab, &tk->counts, corpus->data, corpus->len, min_freq,
                                err);
    case TOKENIZER_BPE:
        if (bpe_init(&tk->bpe, err) != 0) return -1;
        return bpe_train(&tk->bpe, corpus->data, corpus->len, vocab_size, err);
    case TOKENIZER_TAYLOR_SOURCE: return taylor_vocab(&tk->vocab, TAYLOR_SOURCE, err);
    case TOKENIZER_TAYLOR_TARGET: return taylor_vocab(&tk->vocab, TAYLOR_TARGET, err);
    }
    return error_set(err, "unknown tokenizer kind %d", (int)kind);
}

void tokenizer_free(Tokenizer *tk)
{
    vocab_free(&tk->vocab);
    free(tk->counts);
    tk->counts = NULL;
    bpe_free(&tk->bpe);
}

int tokenizer_encode(const Tokenizer *tk, const uint8_t *text, size_t len, int64_t *ids,
                     int64_t *n, Error *err)
{
    switch (tk->kind) {
    case TOKENIZER_CHAR: return char_encode(&tk->vocab, text, len, ids, n, err);
    case TOKENIZER_WORD: return word_encode(&tk->vocab, text, len, ids, n, err);
    case TOKENIZER_BPE: return bpe_encode(&tk->bpe, text, len, ids, n, err);
    default: return taylor_encode(&tk->vocab, text, len, ids, n, err);
    }
}

int tokenizer_decode(const Tokenizer *tk, const int64_t *ids, int64_t n, Text *out, Error *err)
{
    return vocab_decode(tokenizer_vocab(tk), ids, n, tk->kind == TOKENIZER_WORD ? " " : "", out,
                        err);
}
