/*
 * model_config.c - see model_config.h: the names of the model kinds and the
 * checks of a config, every size computed without wrapping before chapter
 * 07 lays out a single tensor.
 */
#include "model_config.h"

const char *model_kind_name(ModelKind kind)
{
    switch (kind) {
    case MODEL_SEQ2SEQ:    return "seq2seq";
    case MODEL_LABELLER:   return "labeller";
    case MODEL_CLASSIFIER: return "classifier";
    case MODEL_SET:        return "set";
    case MODEL_LM:         return "lm";
    }
    return "?";
}

int model_config_check(const ModelConfig *c, Error *err)
{
    int seq2seq = c->kind == MODEL_SEQ2SEQ;
    if (c->kind != MODEL_SEQ2SEQ && c->kind != MODEL_LABELLER && c->kind != MODEL_CLASSIFIER &&
        c->kind != MODEL_SET && c->kind != MODEL_LM)
        return error_set(err, "model: kind %d is not seq2seq, labeller, classifier, set or lm",
                         c->kind);
    if (c->kind == MODEL_SET) {
        /* features in, one score per element out, and nothing that needs ids
         * or an order */
        if (c->input_dim < 1 || c->src_vocab != 0 || c->tgt_vocab != 1)
            return error_set(err, "model: a set model needs input_dim >= 1, src_vocab 0 and "
                             "tgt_vocab 1 (input_dim %d, src_vocab %d, tgt_vocab %d)",
                             c->input_dim, c->src_vocab, c->tgt_vocab);
        if (c->pad_id != -1 || c->learned_pos || c->scale_embedding || c->share_embeddings)
            return error_set(err, "model: a set model has no padding, positions, embedding "
                             "scale or shared embeddings (pad_id %d, learned_pos %d, "
                             "scale_embedding %d, share_embeddings %d)", c->pad_id,
                             c->learned_pos, c->scale_embedding, c->share_embeddings);
    } else if (c->input_dim != 0) {
        return error_set(err, "model: input_dim %d: only a set model reads features",
                         c->input_dim);
    } else if (c->src_vocab < 1 || c->tgt_vocab < 1) {
        return error_set(err, "model: src_vocab %d and tgt_vocab %d must be at least 1",
                         c->src_vocab, c->tgt_vocab);
    }
    if (c->d_model < 1 || c->nhead < 1 || c->dim_feedforward < 1 || c->max_len < 1)
        return error_set(err, "model: d_model %d, nhead %d, dim_feedforward %d and max_len %d "
                         "must be at least 1", c->d_model, c->nhead, c->dim_feedforward,
                         c->max_len);
    if (c->d_model % c->nhead != 0)
        return error_set(err, "model: d_model %d is not divisible by nhead %d", c->d_model,
                         c->nhead);
    if (c->num_encoder_layers < 1 || c->num_encoder_layers > 64)
        return error_set(err, "model: num_encoder_layers %d is not in [1, 64]",
                         c->num_encoder_layers);
    if (seq2seq ? (c->num_decoder_layers < 1 || c->num_decoder_layers > 64)
                : c->num_decoder_layers != 0)
        return error_set(err, "model: num_decoder_layers %d: a %s model needs %s",
                         c->num_decoder_layers, model_kind_name(c->kind),
                         seq2seq ? "1 to 64" : "0");
    if (c->scale_embedding < 0 || c->scale_embedding > 2)
        return error_set(err, "model: scale_embedding %d is not 0 (none), 1 (sqrt(d_model)) "
                         "or 2 (learned)", c->scale_embedding);
    if (c->kind == MODEL_LM && c->src_vocab != c->tgt_vocab)
        return error_set(err, "model: a language model predicts its own ids: src_vocab %d and "
                         "tgt_vocab %d must be equal", c->src_vocab, c->tgt_vocab);
    if (c->share_embeddings && (!seq2seq || c->src_vocab != c->tgt_vocab))
        return error_set(err, "model: share_embeddings needs a seq2seq model with equal "
                         "vocabularies (src_vocab %d, tgt_vocab %d)", c->src_vocab, c->tgt_vocab);
    if (c->pad_id < -1 || (c->pad_id >= 0 &&
                           (c->pad_id >= c->src_vocab || (seq2seq && c->pad_id >= c->tgt_vocab))))
        return error_set(err, "model: pad_id %d is outside the vocabularies (or -1 for none)",
                         c->pad_id);
    if (!(c->eps > 0.0f)) return error_set(err, "model: eps %g must be positive", c->eps);
    if (!(c->dropout >= 0.0f && c->dropout < 1.0f))
        return error_set(err, "model: dropout %g is not in [0, 1)", c->dropout);
    if (c->max_len > MODEL_MAX_LEN)
        return error_set(err, "model: max_len %d is above %d positions", c->max_len,
                         MODEL_MAX_LEN);
    /* The parameter count, every term in double so that no size wraps (two
     * vocabularies near INT_MAX would overflow an int sum): it is checked
     * before anything is allocated or any table built. */
    double D = c->d_model, F = c->dim_feedforward;
    double Vs = c->src_vocab, Vt = c->tgt_vocab, max_len = c->max_len, I = c->input_dim;
    double enc = 4 * D * D + 2 * D * F + 9 * D + F;            /* attention, FFN, two norms */
    double dec = 8 * D * D + 2 * D * F + 15 * D + F;           /* two attentions, three norms */
    double total = c->num_encoder_layers * enc + c->num_decoder_layers * dec
                 + (Vs + Vt + 2 * max_len + 4) * D             /* embeddings, positions, norms */
                 + (Vt + 1) * (D + 1) + (I + 1) * D;           /* generator, input_net */
    if (total > MODEL_MAX_PARAMS || D * F > MODEL_MAX_PARAMS || D * D > MODEL_MAX_PARAMS ||
        max_len * D > MODEL_MAX_PARAMS)
        return error_set(err, "model: about %.3g parameters (d_model %d, dim_feedforward %d, "
                         "%d + %d layers); this project allows at most %d", total, c->d_model,
                         c->dim_feedforward, c->num_encoder_layers, c->num_decoder_layers,
                         MODEL_MAX_PARAMS);
    return 0;
}
