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
 * five gradients are ADDED (+=); dx may be NULL. dhidden is scratch space of
 * (B, T, F) floats that the backward overwrites.
 *
 * Read next: the encoder layer, which wraps this block (and self-attention)
 * in residual connections and LayerNorm.
 *
 * Returns 0 (the exercise stubs return -1).
 */
#ifndef FFN_H
#define FFN_H

#include <stdint.h>

int ffn_forward(float *out,                 /* (B, T, D) */
                float *pre,                 /* (B, T, F) saved: linear1's output */
                float *hidden,              /* (B, T, F) saved: linear2's input */
                const float *x,             /* (B, T, D) */
                const float *w1,            /* (F, D) linear1.weight */
                const float *b1,            /* (F,)   linear1.bias, or NULL */
                const float *w2,            /* (D, F) linear2.weight */
                const float *b2,            /* (D,)   linear2.bias, or NULL */
                const uint8_t *mask,        /* (B, T, F) dropout mask, or NULL */
                float p, int B, int T, int D, int F);

int ffn_backward(float *dx,                 /* (B, T, D), accumulated, or NULL */
                 float *dw1,                /* (F, D), accumulated */
                 float *db1,                /* (F,), accumulated, or NULL (no bias) */
                 float *dw2,                /* (D, F), accumulated */
                 float *db2,                /* (D,), accumulated, or NULL (no bias) */
                 float *dhidden,            /* (B, T, F) scratch */
                 const float *dout,         /* (B, T, D) */
                 const float *x,            /* (B, T, D) */
                 const float *pre,          /* (B, T, F) from the forward */
                 const float *hidden,       /* (B, T, F) from the forward */
                 const float *w1,           /* (F, D) */
                 const float *w2,           /* (D, F) */
                 const uint8_t *mask,       /* (B, T, F) the forward's mask, or NULL */
                 float p, int B, int T, int D, int F);

#endif
