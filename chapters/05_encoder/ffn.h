/*
 * ffn.h - the position-wise feed-forward block of nn.TransformerEncoderLayer,
 * linear2(dropout(relu(linear1(x)))), applied to every position on its own:
 * the functions see rows = N * T independent rows of width D. The formulas,
 * forward and backward: the chapter's README, "The feed-forward block"; a
 * worked example in its appendix, "Worked examples".
 *
 * Letters: D d_model, F dim_feedforward (the hidden width); rows the
 * positions, N * T in the book's letters.
 *
 * The dropout after linear2 is not part of this block: in the encoder layer
 * it belongs to the residual connection (dropout2). The biases may be NULL
 * (the layer's bias=False).
 *
 * Read next: the encoder layer, which wraps this block (and self-attention)
 * in residual connections and LayerNorm.
 *
 * Returns 0 (the exercise stubs return -1).
 */
#ifndef FFN_H
#define FFN_H

#include <stdint.h>

/* The block's parameters under nn.TransformerEncoderLayer's names, or their
 * gradients (the same type; ADDED to, b1 and b2 NULL without biases). */
typedef struct {
    float *w1;   /* (F, D) linear1.weight */
    float *b1;   /* (F,)   linear1.bias, or NULL (bias=False) */
    float *w2;   /* (D, F) linear2.weight */
    float *b2;   /* (D,)   linear2.bias, or NULL */
} FfnParams;

/* The block's sizes, what the forward keeps for the backward, and the
 * dropout it applied. */
typedef struct {
    int D, F;              /* d_model and the hidden width */
    float *pre;            /* (rows, F) linear1's output */
    float *hidden;         /* (rows, F) linear2's input: dropout(relu(pre)) */
    const uint8_t *mask;   /* (rows, F) the dropout mask, or NULL: no dropout */
    float p;               /* the probability the mask was drawn with */
} FfnCache;

/* out (rows, D) = the block on x (rows, D); fills c->pre and c->hidden.
 * rows = N * T: every position on its own. */
int ffn_forward(float *out, FfnCache *c, const float *x, const FfnParams *p, int rows);

/* dx (rows, D) += the gradient of x, or dx NULL; g += the parameters'
 * gradients. dout (rows, D) is the gradient of the output, x and c what the
 * forward saw and kept, dhidden (rows, F) scratch the backward overwrites.
 * ReLU's slope at pre == 0 is taken as 0, as in PyTorch. */
int ffn_backward(float *dx, const FfnParams *g, float *dhidden, const float *dout,
                 const float *x, const FfnParams *p, const FfnCache *c, int rows);

#endif
