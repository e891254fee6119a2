/*
 * ffn.h - the position-wise feed-forward network of the Transformer, the
 * block nn.TransformerEncoderLayer computes as
 *
 *     linear2(dropout(relu(linear1(x))))
 *
 * Letters: B batch, T sequence length, D d_model, F dim_feedforward (the
 * hidden width; 2048 = 4 x 512 in the paper).
 *
 * "Position-wise": the same two-layer network is applied to every one of the
 * B * T positions on its own; nothing here mixes positions (attention does
 * that). So the functions see B * T independent rows of width D:
 *
 *     pre    = x W1^T + b1                 (B, T, F)   W1 = linear1.weight (F, D)
 *     hidden = dropout(relu(pre))          (B, T, F)
 *     out    = hidden W2^T + b2            (B, T, D)   W2 = linear2.weight (D, F)
 *
 * The parameter names are those of nn.TransformerEncoderLayer's state_dict:
 * linear1.weight, linear1.bias, linear2.weight, linear2.bias. The biases may
 * be NULL (the layer's bias=False).
 *
 * The forward saves pre and hidden for the backward. Dropout takes a mask
 * (see dropout.h): draw it with dropout_mask() in training, pass NULL in
 * evaluation mode or with p = 0. The dropout after linear2 is not part of
 * this block: in the encoder layer it belongs to the residual connection.
 *
 * The backward goes through the same steps in reverse:
 *
 *     dhidden = dout W2;          dW2 += dout^T hidden;   db2 += sum of dout rows
 *     dpre    = dhidden * mask / (1 - p) * [pre > 0]
 *     dx     += dpre W1;          dW1 += dpre^T x;        db1 += sum of dpre rows
 *
 * ReLU's derivative is taken as 0 at pre == 0 exactly, as PyTorch does. All
 * five gradients are ADDED (+=); dx may be NULL.
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
 * rows = B * T: every position on its own. */
int ffn_forward(float *out, FfnCache *c, const float *x, const FfnParams *p, int rows);

/* dx (rows, D) += the gradient of x, or dx NULL; g += the parameters'
 * gradients. dout (rows, D) is the gradient of the output, x and c what the
 * forward saw and kept, dhidden (rows, F) scratch the backward overwrites. */
int ffn_backward(float *dx, const FfnParams *g, float *dhidden, const float *dout,
                 const float *x, const FfnParams *p, const FfnCache *c, int rows);

#endif
